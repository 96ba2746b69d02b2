// Hearth (installers/llama_build.py SPEED_PATCHES): added to ggml-cpu/arch/x86/repack.cpp.
// Q4_K weights repacked eight rows to a block (block_q4_Kx8) against several activation columns of a
// short batch. Stock llama.cpp multiplies four or more columns with ggml_gemm_q4_K_8x8_q8_K, which
// sums in another order than ggml_gemv_q4_K_8x8_q8_K does for a single token, so a verify batch would
// differ from plain decoding. This runs the gemv's operations, in the gemv's order, for each column,
// but unpacks each block's quants, scales and mins once for all of them: a batch's rows stay
// bit-identical to single tokens (tests/engine/test_column_kernels.py) at close to the gemm's cost.
#if defined(__AVX2__)
static inline void hearth_q4_Kx8_cols(const int nb, const int ncols, float * GGML_RESTRICT s, const size_t bs,
        const block_q4_Kx8 * GGML_RESTRICT b_ptr, const char * GGML_RESTRICT vy, const size_t by) {
    static const uint32_t kmask1 = 0x3f3f3f3f;
    static const uint32_t kmask2 = 0x0f0f0f0f;
    static const uint32_t kmask3 = 0x03030303;
    const __m128i deltamask = _mm_set_epi8(15, 14, 7, 6, 13, 12, 5, 4, 11, 10, 3, 2, 9, 8, 1, 0);
    const __m128i scalemask = _mm_set_epi8(7, 7, 3, 3, 6, 6, 2, 2, 5, 5, 1, 1, 4, 4, 0, 0);
    const __m256i finalpermutemask = _mm256_set_epi32(7, 5, 3, 1, 6, 4, 2, 0);
    const __m256i m4b = _mm256_set1_epi8(0x0F);
    const block_q8_K * GGML_RESTRICT a[4];
    __m256 acc_row[4];
    __m256 acc_min_rows[4];
    for (int c = 0; c < ncols; ++c) {
        a[c] = (const block_q8_K *) (vy + c * by);
        acc_row[c] = _mm256_setzero_ps();
        acc_min_rows[c] = _mm256_setzero_ps();
    }
    for (int b = 0; b < nb; ++b) {
        const __m256 col_scale_f32 = GGML_F32Cx8_REARRANGE_LOAD(b_ptr[b].d, deltamask);
        const __m256 col_dmin_f32 = GGML_F32Cx8_LOAD(b_ptr[b].dmin);
        __m256i iacc_b[4], iacc_min_b[4], q8s[4];
        for (int c = 0; c < ncols; ++c) {
            iacc_b[c] = _mm256_setzero_si256();
            iacc_min_b[c] = _mm256_setzero_si256();
            const __m256i q8sums = _mm256_loadu_si256((const __m256i *) (a[c][b].bsums));
            q8s[c] = _mm256_castsi128_si256(_mm_hadd_epi16(_mm256_castsi256_si128(q8sums), _mm256_extracti128_si256(q8sums, 1)));
            q8s[c] = _mm256_permute2f128_si256(q8s[c], q8s[c], 0);
        }
        for (int sb = 0; sb < QK_K / 64; sb++) {
            // The weights of the sub-block pair, unpacked and arranged as the gemv arranges them: for
            // each pair of its multiply-adds (r[h][k][0], r[h][k][1]), h the sub-block, k the 8-byte group.
            __m256i r[2][4][2];
            for (int k = 0; k < 4; ++k) {
                const __m256i raw_0123 = _mm256_loadu_si256((const __m256i *) (b_ptr[b].qs + 64 * k + sb * 256));
                const __m256i raw_4567 = _mm256_loadu_si256((const __m256i *) (b_ptr[b].qs + 32 + 64 * k + sb * 256));
                const __m256i v0123[2] = {_mm256_and_si256(raw_0123, m4b), _mm256_and_si256(_mm256_srli_epi16(raw_0123, 4), m4b)};
                const __m256i v4567[2] = {_mm256_and_si256(raw_4567, m4b), _mm256_and_si256(_mm256_srli_epi16(raw_4567, 4), m4b)};
                for (int h = 0; h < 2; ++h) {
                    r[h][k][0] = _mm256_blend_epi32(v0123[h], _mm256_shuffle_epi32(v4567[h], 177), 170);
                    r[h][k][1] = _mm256_blend_epi32(_mm256_shuffle_epi32(v0123[h], 177), v4567[h], 170);
                }
            }
            uint32_t utmp_0[4], utmp_1[4];
            memcpy(utmp_0, b_ptr[b].scales + 24 * sb, 12);
            utmp_0[3] = ((utmp_0[2] >> 4) & kmask2) | (((utmp_0[1] >> 6) & kmask3) << 4);
            const uint32_t uaux_0 = utmp_0[1] & kmask1;
            utmp_0[1] = (utmp_0[2] & kmask2) | (((utmp_0[0] >> 6) & kmask3) << 4);
            utmp_0[2] = uaux_0;
            utmp_0[0] &= kmask1;
            memcpy(utmp_1, b_ptr[b].scales + 12 + sb * 24, 12);
            utmp_1[3] = ((utmp_1[2] >> 4) & kmask2) | (((utmp_1[1] >> 6) & kmask3) << 4);
            const uint32_t uaux_1 = utmp_1[1] & kmask1;
            utmp_1[1] = (utmp_1[2] & kmask2) | (((utmp_1[0] >> 6) & kmask3) << 4);
            utmp_1[2] = uaux_1;
            utmp_1[0] &= kmask1;
            const __m128i mins_and_scales_0 = _mm_set_epi32(utmp_0[3], utmp_0[2], utmp_0[1], utmp_0[0]);
            const __m128i mins_and_scales_1 = _mm_set_epi32(utmp_1[3], utmp_1[2], utmp_1[1], utmp_1[0]);
            const __m256i scales[2] = {_mm256_cvtepu8_epi16(_mm_shuffle_epi8(mins_and_scales_0, scalemask)),
                                       _mm256_cvtepu8_epi16(_mm_shuffle_epi8(mins_and_scales_1, scalemask))};
            const __m256i mins_01 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_shuffle_epi32(mins_and_scales_0, 78),
                                                                           _mm_shuffle_epi32(mins_and_scales_1, 78)));
            for (int c = 0; c < ncols; ++c) {
                const int8_t * GGML_RESTRICT q8 = a[c][b].qs + sb * 64;
                __m256i iacc[2];
                for (int h = 0; h < 2; ++h) {
                    __m256i lhs_0 = _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *) (q8 + 32 * h)));
                    __m256i lhs_1 = _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *) (q8 + 32 * h + 16)));
                    lhs_0 = _mm256_permute2f128_si256(lhs_0, lhs_0, 0);
                    lhs_1 = _mm256_permute2f128_si256(lhs_1, lhs_1, 0);
                    __m256i sum = _mm256_setzero_si256();
                    sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(r[h][0][0], _mm256_shuffle_epi32(lhs_0, 0)));
                    sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(r[h][0][1], _mm256_shuffle_epi32(lhs_0, 85)));
                    sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(r[h][1][0], _mm256_shuffle_epi32(lhs_0, 170)));
                    sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(r[h][1][1], _mm256_shuffle_epi32(lhs_0, 255)));
                    sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(r[h][2][0], _mm256_shuffle_epi32(lhs_1, 0)));
                    sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(r[h][2][1], _mm256_shuffle_epi32(lhs_1, 85)));
                    sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(r[h][3][0], _mm256_shuffle_epi32(lhs_1, 170)));
                    sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(r[h][3][1], _mm256_shuffle_epi32(lhs_1, 255)));
                    iacc[h] = _mm256_madd_epi16(sum, scales[h]);
                }
                const __m256i iacc_sb = _mm256_add_epi32(iacc[0], iacc[1]);
                const __m256i iacc_min_sb = _mm256_madd_epi16(_mm256_shuffle_epi32(q8s[c], 0), mins_01);
                q8s[c] = _mm256_bsrli_epi128(q8s[c], 4);
                iacc_b[c] = _mm256_add_epi32(iacc_b[c], iacc_sb);
                iacc_min_b[c] = _mm256_add_epi32(iacc_min_b[c], iacc_min_sb);
            }
        }
        for (int c = 0; c < ncols; ++c) {
            const __m256 row_scale_f32 = _mm256_set1_ps(a[c][b].d);
            acc_row[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc_b[c]), _mm256_mul_ps(col_scale_f32, row_scale_f32), acc_row[c]);
            acc_min_rows[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc_min_b[c]), _mm256_mul_ps(col_dmin_f32, row_scale_f32), acc_min_rows[c]);
        }
    }
    for (int c = 0; c < ncols; ++c) {
        _mm256_storeu_ps(s + c * bs, _mm256_sub_ps(_mm256_permutevar8x32_ps(acc_row[c], finalpermutemask), acc_min_rows[c]));
    }
}
#endif

// nr activation rows (plain block_q8_K, by bytes apart) against nc weight rows (nc / 8 repacked
// groups); row y's results go to s + y * bs.
void hearth_gemv_q4_K_8x8_q8_K_cols(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx,
        const void * GGML_RESTRICT vy, size_t by, int nr, int nc) {
    const int nb = n / QK_K;
    for (int x = 0; x < nc / 8; ++x) {
        const block_q4_Kx8 * GGML_RESTRICT b_ptr = (const block_q4_Kx8 *) vx + x * nb;
        for (int y = 0; y < nr; y += 4) {
            const char * GGML_RESTRICT a_ptr = (const char *) vy + y * by;
#if defined(__AVX2__)
            switch (nr - y < 4 ? nr - y : 4) {
                case 4: hearth_q4_Kx8_cols(nb, 4, s + y * bs + x * 8, bs, b_ptr, a_ptr, by); break;
                case 3: hearth_q4_Kx8_cols(nb, 3, s + y * bs + x * 8, bs, b_ptr, a_ptr, by); break;
                case 2: hearth_q4_Kx8_cols(nb, 2, s + y * bs + x * 8, bs, b_ptr, a_ptr, by); break;
                default: hearth_q4_Kx8_cols(nb, 1, s + y * bs + x * 8, bs, b_ptr, a_ptr, by); break;
            }
#else
            for (int c = 0; c < nr - y && c < 4; ++c) {
                ggml_gemv_q4_K_8x8_q8_K(n, s + (y + c) * bs + x * 8, 0, b_ptr, a_ptr + c * by, 1, 8);
            }
#endif
        }
    }
}
