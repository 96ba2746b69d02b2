// Hearth (installers/llama_build.py SPEED_PATCHES): added to ggml-cpu/arch/x86/quants.c.
// One Q4_K, Q5_K or Q6_K weight row against up to eight columns of a short batch. A block's weights
// are unpacked (nibbles, high bits, scales and mins) once, then each column takes the same operations
// in the same order as ggml_vec_dot_q4_K_q8_K, _q5_K_ and _q6_K_ (AVX2) take them alone: the same
// saturating byte products, the same float multiply-adds block after block, the same final sums. So a
// verify batch's rows stay bit-identical to single tokens (tests/engine/test_quant_exactness.py).
#if defined(__AVX2__)
#define HEARTH_COLS 8

// A Q4_K or Q5_K block's eight 6-bit scales and mins, unpacked as ggml_vec_dot_q4_K_q8_K unpacks them:
// the mins as 8 int16, the scales as 8 int16 in both halves of a 256-bit vector.
static inline void hearth_k_scales(const uint8_t * GGML_RESTRICT packed, __m128i * mins, __m256i * scales) {
    static const uint32_t kmask1 = 0x3f3f3f3f;
    static const uint32_t kmask2 = 0x0f0f0f0f;
    static const uint32_t kmask3 = 0x03030303;
    uint32_t utmp[4];
    memcpy(utmp, packed, 12);
    utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
    const uint32_t uaux = utmp[1] & kmask1;
    utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
    utmp[2] = uaux;
    utmp[0] &= kmask1;
    const __m256i mins_and_scales = _mm256_cvtepu8_epi16(_mm_set_epi32(utmp[3], utmp[2], utmp[1], utmp[0]));
    *mins = _mm256_extracti128_si256(mins_and_scales, 1);
    const __m128i sc128 = _mm256_extracti128_si256(mins_and_scales, 0);
    *scales = MM256_SET_M128I(sc128, sc128);
}

// Q4_K and Q5_K alike, once a sub-block pair's quants are bytes: each column's 32-bit sums of the
// pair (j) against its activations, as the single-row kernels make them.
static inline void hearth_k_sums(const int nc, __m256i * sumi, const block_q8_K * GGML_RESTRICT const * y, const int i,
        const int j, const __m256i q_0, const __m256i q_1, const __m256i scale_0, const __m256i scale_1) {
    for (int c = 0; c < nc; ++c) {
        const int8_t * GGML_RESTRICT q8 = y[c][i].qs + 64*j;
        const __m256i p16_0 = _mm256_madd_epi16(scale_0, _mm256_maddubs_epi16(q_0, _mm256_loadu_si256((const __m256i *) q8)));
        const __m256i p16_1 = _mm256_madd_epi16(scale_1, _mm256_maddubs_epi16(q_1, _mm256_loadu_si256((const __m256i *) (q8 + 32))));
        sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(p16_0, p16_1));
    }
}

// Each column's block sums, scaled by its own and the weights' scale, added to its accumulator.
static inline void hearth_k_scaled(const int nc, __m256 * acc, const __m256i * sumi,
        const block_q8_K * GGML_RESTRICT const * y, const int i, const float xd) {
    for (int c = 0; c < nc; ++c) {
        const float d = y[c][i].d * xd;
        acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
    }
}

static inline void hearth_q4_K_cols(const int nb, const int nc, float * GGML_RESTRICT s, const size_t bs,
        const block_q4_K * GGML_RESTRICT x, const char * GGML_RESTRICT vy, const size_t by) {
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const block_q8_K * GGML_RESTRICT y[HEARTH_COLS];
    __m256 acc[HEARTH_COLS];
    __m128 acc_m[HEARTH_COLS];
    for (int c = 0; c < nc; ++c) {
        y[c] = (const block_q8_K *) (vy + c * by);
        acc[c] = _mm256_setzero_ps();
        acc_m[c] = _mm_setzero_ps();
    }
    for (int i = 0; i < nb; ++i) {
        const float xd = GGML_CPU_FP16_TO_FP32(x[i].d);
        const float xdmin = GGML_CPU_FP16_TO_FP32(x[i].dmin);
        __m128i mins;
        __m256i scales;
        hearth_k_scales(x[i].scales, &mins, &scales);
        for (int c = 0; c < nc; ++c) {
            const float dmin = -y[c][i].d * xdmin;
            const __m256i q8sums = _mm256_loadu_si256((const __m256i *) y[c][i].bsums);
            const __m128i q8s = _mm_hadd_epi16(_mm256_extracti128_si256(q8sums, 0), _mm256_extracti128_si256(q8sums, 1));
            const __m128i prod = _mm_madd_epi16(mins, q8s);
            acc_m[c] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m[c]);
        }
        __m256i sumi[HEARTH_COLS];
        for (int c = 0; c < nc; ++c) {
            sumi[c] = _mm256_setzero_si256();
        }
        const uint8_t * GGML_RESTRICT q4 = x[i].qs;
        for (int j = 0; j < QK_K/64; ++j) {
            const __m256i scale_l = _mm256_shuffle_epi8(scales, get_scale_shuffle_k4(2*j+0));
            const __m256i scale_h = _mm256_shuffle_epi8(scales, get_scale_shuffle_k4(2*j+1));
            const __m256i q4bits = _mm256_loadu_si256((const __m256i *) q4); q4 += 32;
            const __m256i q4l = _mm256_and_si256(q4bits, m4);
            const __m256i q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
            hearth_k_sums(nc, sumi, y, i, j, q4l, q4h, scale_l, scale_h);
        }
        hearth_k_scaled(nc, acc, sumi, y, i, xd);
    }
    for (int c = 0; c < nc; ++c) {
        __m128 m = _mm_add_ps(acc_m[c], _mm_movehl_ps(acc_m[c], acc_m[c]));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        s[c * bs] = hsum_float_8(acc[c]) + _mm_cvtss_f32(m);
    }
}

static inline void hearth_q5_K_cols(const int nb, const int nc, float * GGML_RESTRICT s, const size_t bs,
        const block_q5_K * GGML_RESTRICT x, const char * GGML_RESTRICT vy, const size_t by) {
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m128i mzero = _mm_setzero_si128();
    const __m256i mone = _mm256_set1_epi8(1);
    const block_q8_K * GGML_RESTRICT y[HEARTH_COLS];
    __m256 acc[HEARTH_COLS];
    float summs[HEARTH_COLS];
    for (int c = 0; c < nc; ++c) {
        y[c] = (const block_q8_K *) (vy + c * by);
        acc[c] = _mm256_setzero_ps();
        summs[c] = 0.f;
    }
    for (int i = 0; i < nb; ++i) {
        const float xd = GGML_CPU_FP16_TO_FP32(x[i].d);
        const float xdmin = GGML_CPU_FP16_TO_FP32(x[i].dmin);
        __m128i mins;
        __m256i scales;
        hearth_k_scales(x[i].scales, &mins, &scales);
        for (int c = 0; c < nc; ++c) {
            const float dmin = -y[c][i].d * xdmin;
            const __m256i q8sums = _mm256_loadu_si256((const __m256i *) y[c][i].bsums);
            const __m128i q8s = _mm_hadd_epi16(_mm256_extracti128_si256(q8sums, 0), _mm256_extracti128_si256(q8sums, 1));
            const __m128i prod = _mm_madd_epi16(mins, q8s);
            const __m128i hsum = _mm_hadd_epi32(_mm_hadd_epi32(prod, mzero), mzero);
            summs[c] += dmin * _mm_extract_epi32(hsum, 0);
        }
        __m256i sumi[HEARTH_COLS];
        for (int c = 0; c < nc; ++c) {
            sumi[c] = _mm256_setzero_si256();
        }
        const uint8_t * GGML_RESTRICT q5 = x[i].qs;
        const __m256i hbits = _mm256_loadu_si256((const __m256i *) x[i].qh);
        __m256i hmask = mone;
        int bit = 0;
        for (int j = 0; j < QK_K/64; ++j) {
            const __m256i scale_0 = _mm256_shuffle_epi8(scales, get_scale_shuffle_k4(2*j+0));
            const __m256i scale_1 = _mm256_shuffle_epi8(scales, get_scale_shuffle_k4(2*j+1));
            const __m256i q5bits = _mm256_loadu_si256((const __m256i *) q5); q5 += 32;
            const __m256i q5l_0 = _mm256_and_si256(q5bits, m4);
            const __m256i q5h_0 = _mm256_slli_epi16(_mm256_srli_epi16(_mm256_and_si256(hbits, hmask), bit++), 4);
            const __m256i q5_0 = _mm256_add_epi8(q5l_0, q5h_0);
            hmask = _mm256_slli_epi16(hmask, 1);
            const __m256i q5l_1 = _mm256_and_si256(_mm256_srli_epi16(q5bits, 4), m4);
            const __m256i q5h_1 = _mm256_slli_epi16(_mm256_srli_epi16(_mm256_and_si256(hbits, hmask), bit++), 4);
            const __m256i q5_1 = _mm256_add_epi8(q5l_1, q5h_1);
            hmask = _mm256_slli_epi16(hmask, 1);
            hearth_k_sums(nc, sumi, y, i, j, q5_0, q5_1, scale_0, scale_1);
        }
        hearth_k_scaled(nc, acc, sumi, y, i, xd);
    }
    for (int c = 0; c < nc; ++c) {
        s[c * bs] = hsum_float_8(acc[c]) + summs[c];
    }
}

static inline void hearth_q6_K_cols(const int nb, const int nc, float * GGML_RESTRICT s, const size_t bs,
        const block_q6_K * GGML_RESTRICT x, const char * GGML_RESTRICT vy, const size_t by) {
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i m15 = _mm256_set1_epi8(15);
    const block_q8_K * GGML_RESTRICT y[HEARTH_COLS];
    __m256 acc[HEARTH_COLS];
    for (int c = 0; c < nc; ++c) {
        y[c] = (const block_q8_K *) (vy + c * by);
        acc[c] = _mm256_setzero_ps();
    }
    for (int i = 0; i < nb; ++i) {
        const float xd = GGML_CPU_FP16_TO_FP32(x[i].d);
        const uint8_t * GGML_RESTRICT q4 = x[i].ql;
        const uint8_t * GGML_RESTRICT qh = x[i].qh;
        const __m128i scales = _mm_loadu_si128((const __m128i *) x[i].scales);
        const __m256i scales_16 = _mm256_cvtepi8_epi16(scales);
        __m256i sumi[HEARTH_COLS];
        for (int c = 0; c < nc; ++c) {
            sumi[c] = _mm256_setzero_si256();
        }
        int is = 0;
        for (int j = 0; j < QK_K/128; ++j) {
            const __m256i q4bits1 = _mm256_loadu_si256((const __m256i *) q4); q4 += 32;
            const __m256i q4bits2 = _mm256_loadu_si256((const __m256i *) q4); q4 += 32;
            const __m256i q4bitsH = _mm256_loadu_si256((const __m256i *) qh); qh += 32;
            const __m256i q4h_0 = _mm256_slli_epi16(_mm256_and_si256(q4bitsH, m3), 4);
            const __m256i q4h_1 = _mm256_slli_epi16(_mm256_and_si256(q4bitsH, _mm256_set1_epi8(12)), 2);
            const __m256i q4h_2 = _mm256_and_si256(q4bitsH, _mm256_set1_epi8(48));
            const __m256i q4h_3 = _mm256_srli_epi16(_mm256_and_si256(q4bitsH, _mm256_set1_epi8(-64)), 2);
            const __m256i q4_0 = _mm256_or_si256(_mm256_and_si256(q4bits1, m15), q4h_0);
            const __m256i q4_1 = _mm256_or_si256(_mm256_and_si256(q4bits2, m15), q4h_1);
            const __m256i q4_2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits1, 4), m15), q4h_2);
            const __m256i q4_3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits2, 4), m15), q4h_3);
            const __m256i scale_0 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, get_scale_shuffle(is + 0)));
            const __m256i scale_1 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, get_scale_shuffle(is + 1)));
            const __m256i scale_2 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, get_scale_shuffle(is + 2)));
            const __m256i scale_3 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, get_scale_shuffle(is + 3)));
            is += 4;
            for (int c = 0; c < nc; ++c) {
                const int8_t * GGML_RESTRICT q8 = y[c][i].qs + 128*j;
                const __m256i p16_0 = _mm256_madd_epi16(scale_0, _mm256_maddubs_epi16(q4_0, _mm256_loadu_si256((const __m256i *) q8)));
                const __m256i p16_1 = _mm256_madd_epi16(scale_1, _mm256_maddubs_epi16(q4_1, _mm256_loadu_si256((const __m256i *) (q8 + 32))));
                const __m256i p16_2 = _mm256_madd_epi16(scale_2, _mm256_maddubs_epi16(q4_2, _mm256_loadu_si256((const __m256i *) (q8 + 64))));
                const __m256i p16_3 = _mm256_madd_epi16(scale_3, _mm256_maddubs_epi16(q4_3, _mm256_loadu_si256((const __m256i *) (q8 + 96))));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(p16_0, p16_1));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(p16_2, p16_3));
            }
        }
        for (int c = 0; c < nc; ++c) {
            const __m256i q8sums = _mm256_loadu_si256((const __m256i *) y[c][i].bsums);
            const __m256i q8sclsub = _mm256_slli_epi32(_mm256_madd_epi16(q8sums, scales_16), 5);
            const float d = y[c][i].d * xd;
            acc[c] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d), _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi[c], q8sclsub)), acc[c]);
        }
    }
    for (int c = 0; c < nc; ++c) {
        s[c * bs] = hsum_float_8(acc[c]);
    }
}

// The exported entries: a whole weight row against ncols columns, eight at a time (eight
// paid 4-10 % over four at 8-15 rows on Q5_K_M, bench_verify_ops.py).
#define HEARTH_K_COLUMNS(name, block, kernel)                                                             \
void name(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx,                       \
        const void * GGML_RESTRICT vy, size_t by, int ncols) {                                            \
    const int nb = n / QK_K;                                                                              \
    const block * GGML_RESTRICT x = vx;                                                                   \
    for (int c = 0; c < ncols; c += HEARTH_COLS) {                                                        \
        const int nc = ncols - c < HEARTH_COLS ? ncols - c : HEARTH_COLS;                                 \
        switch (nc) {                                                                                     \
            case 8: kernel(nb, 8, s + c * bs, bs, x, (const char *) vy + c * by, by); break;              \
            case 7: kernel(nb, 7, s + c * bs, bs, x, (const char *) vy + c * by, by); break;              \
            case 6: kernel(nb, 6, s + c * bs, bs, x, (const char *) vy + c * by, by); break;              \
            case 5: kernel(nb, 5, s + c * bs, bs, x, (const char *) vy + c * by, by); break;              \
            case 4: kernel(nb, 4, s + c * bs, bs, x, (const char *) vy + c * by, by); break;              \
            case 3: kernel(nb, 3, s + c * bs, bs, x, (const char *) vy + c * by, by); break;              \
            case 2: kernel(nb, 2, s + c * bs, bs, x, (const char *) vy + c * by, by); break;              \
            default: kernel(nb, 1, s + c * bs, bs, x, (const char *) vy + c * by, by); break;             \
        }                                                                                                 \
    }                                                                                                     \
}
HEARTH_K_COLUMNS(hearth_vec_dot_q4_K_q8_K_cols, block_q4_K, hearth_q4_K_cols)
HEARTH_K_COLUMNS(hearth_vec_dot_q5_K_q8_K_cols, block_q5_K, hearth_q5_K_cols)
HEARTH_K_COLUMNS(hearth_vec_dot_q6_K_q8_K_cols, block_q6_K, hearth_q6_K_cols)
#undef HEARTH_K_COLUMNS
#undef HEARTH_COLS
#else
void hearth_vec_dot_q4_K_q8_K_cols(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx,
        const void * GGML_RESTRICT vy, size_t by, int ncols) {
    for (int c = 0; c < ncols; ++c) {
        ggml_vec_dot_q4_K_q8_K(n, s + c * bs, 0, vx, 0, (const char *) vy + c * by, 0, 1);
    }
}
void hearth_vec_dot_q5_K_q8_K_cols(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx,
        const void * GGML_RESTRICT vy, size_t by, int ncols) {
    for (int c = 0; c < ncols; ++c) {
        ggml_vec_dot_q5_K_q8_K(n, s + c * bs, 0, vx, 0, (const char *) vy + c * by, 0, 1);
    }
}
void hearth_vec_dot_q6_K_q8_K_cols(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx,
        const void * GGML_RESTRICT vy, size_t by, int ncols) {
    for (int c = 0; c < ncols; ++c) {
        ggml_vec_dot_q6_K_q8_K(n, s + c * bs, 0, vx, 0, (const char *) vy + c * by, 0, 1);
    }
}
#endif
