    // Hearth (installers/llama_build.py SPEED_PATCHES): a short batch of Q8_0 reads each weight row
    // once for all its columns, each column summed exactly as a single token is
    // (hearth_vec_dot_q8_0_q8_0_cols, installers/llama_patches/q8_0_columns.c).
#if defined(__AVX2__) && (defined(__x86_64__) || defined(_M_X64))
    if (type == GGML_TYPE_Q8_0 && vec_dot_type == GGML_TYPE_Q8_0 && num_rows_per_vec_dot == 1 &&
            ne02 == 1 && ne03 == 1 && ne12 == 1 && ne13 == 1 && (src1_cont || src1->type != vec_dot_type) &&
            ir1_end - ir1_start > 1) {
        float cols[16 * 16];
        for (int64_t iir1 = ir1_start; iir1 < ir1_end; iir1 += blck_1) {
            const int64_t nr1 = MIN(iir1 + blck_1, ir1_end) - iir1;
            for (int64_t iir0 = ir0_start; iir0 < ir0_end; iir0 += blck_0) {
                const int64_t nr0 = MIN(iir0 + blck_0, ir0_end) - iir0;
                for (int64_t r = 0; r < nr0; ++r) {
                    hearth_vec_dot_q8_0_q8_0_cols(ne00, cols + r, 16, (const char *) src0->data + (iir0 + r) * nb01,
                            (const char *) wdata + iir1 * row_size, row_size, nr1);
                }
                for (int64_t c = 0; c < nr1; ++c) {
                    memcpy((char *) dst->data + (iir1 + c) * nb1 + iir0 * nb0, cols + c * 16, nr0 * sizeof(float));
                }
            }
        }
        return;
    }
#endif

