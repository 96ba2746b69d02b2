    // Hearth (installers/llama_build.py SPEED_PATCHES): a short batch of Q8_0, Q4_K, Q5_K or Q6_K reads
    // each weight row once for all its columns, each column summed exactly as a single token is
    // (installers/llama_patches/q8_0_columns.c, k_quant_columns.c).
#if defined(__AVX2__) && (defined(__x86_64__) || defined(_M_X64))
    void (*const columns_dot)(int, float * GGML_RESTRICT, size_t, const void * GGML_RESTRICT,
            const void * GGML_RESTRICT, size_t, int) =
        type == GGML_TYPE_Q8_0 && vec_dot_type == GGML_TYPE_Q8_0 ? hearth_vec_dot_q8_0_q8_0_cols :
        type == GGML_TYPE_Q4_K && vec_dot_type == GGML_TYPE_Q8_K ? hearth_vec_dot_q4_K_q8_K_cols :
        type == GGML_TYPE_Q5_K && vec_dot_type == GGML_TYPE_Q8_K ? hearth_vec_dot_q5_K_q8_K_cols :
        type == GGML_TYPE_Q6_K && vec_dot_type == GGML_TYPE_Q8_K ? hearth_vec_dot_q6_K_q8_K_cols : NULL;
    if (columns_dot != NULL && num_rows_per_vec_dot == 1 &&
            ne02 == 1 && ne03 == 1 && ne12 == 1 && ne13 == 1 && (src1_cont || src1->type != vec_dot_type) &&
            ir1_end - ir1_start > 1) {
        float cols[16 * 16];
        for (int64_t iir1 = ir1_start; iir1 < ir1_end; iir1 += blck_1) {
            const int64_t nr1 = MIN(iir1 + blck_1, ir1_end) - iir1;
            for (int64_t iir0 = ir0_start; iir0 < ir0_end; iir0 += blck_0) {
                const int64_t nr0 = MIN(iir0 + blck_0, ir0_end) - iir0;
                for (int64_t r = 0; r < nr0; ++r) {
                    columns_dot(ne00, cols + r, 16, (const char *) src0->data + (iir0 + r) * nb01,
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
