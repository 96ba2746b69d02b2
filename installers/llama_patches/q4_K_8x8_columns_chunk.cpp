#if defined(__AVX2__) && (defined(__x86_64__) || defined(_M_X64))
        if (hearth_columns<BLOC_TYPE, INTER_SIZE, NB_COLS>(nrows)) {  // Hearth: each row as a single token
            hearth_gemv_q4_K_8x8_q8_K_cols(ne00, (float *) dst_ptr + src0_start, nb1 / nb0, src0_ptr + src0_start * nb01,
                                           src1_ptr, src1_col_stride, nrows, ncols);
            return;
        }
#endif
