// Hearth (installers/llama_build.py SPEED_PATCHES): added to ggml-cpu/arch/x86/quants.c.
// One Q8_0 weight row against several columns of a short batch. Each column's sum is made by the
// same operations in the same order as ggml_vec_dot_q8_0_q8_0 makes it alone, so a verify batch's
// rows stay bit-identical to single tokens; the row's blocks are loaded once for up to four columns.
static inline void hearth_q8_0_cols(const int nb, const int nc, float * GGML_RESTRICT s, const size_t bs,
        const block_q8_0 * GGML_RESTRICT x, const char * GGML_RESTRICT vy, const size_t by) {
#if defined(__AVX2__)
    const block_q8_0 * GGML_RESTRICT y[4];
    __m256 acc[4];
    for (int c = 0; c < nc; ++c) {
        y[c] = (const block_q8_0 *) (vy + c * by);
        acc[c] = _mm256_setzero_ps();
    }
    for (int ib = 0; ib < nb; ++ib) {
        const float dx = GGML_CPU_FP16_TO_FP32(x[ib].d);
        const __m256i qx = _mm256_loadu_si256((const __m256i *) x[ib].qs);
        for (int c = 0; c < nc; ++c) {
            const __m256 d = _mm256_set1_ps(dx * GGML_CPU_FP16_TO_FP32(y[c][ib].d));
            const __m256i qy = _mm256_loadu_si256((const __m256i *) y[c][ib].qs);
            acc[c] = _mm256_fmadd_ps(d, mul_sum_i8_pairs_float(qx, qy), acc[c]);
        }
    }
    for (int c = 0; c < nc; ++c) {
        s[c * bs] = hsum_float_8(acc[c]);
    }
#else
    for (int c = 0; c < nc; ++c) {
        ggml_vec_dot_q8_0_q8_0(nb * QK8_0, s + c * bs, 0, x, 0, vy + c * by, 0, 1);
    }
#endif
}

void hearth_vec_dot_q8_0_q8_0_cols(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx,
        const void * GGML_RESTRICT vy, size_t by, int ncols) {
    const int nb = n / QK8_0;
    const block_q8_0 * GGML_RESTRICT x = vx;
    int c = 0;
    for (; c + 4 <= ncols; c += 4) {
        hearth_q8_0_cols(nb, 4, s + c * bs, bs, x, (const char *) vy + c * by, by);
    }
    switch (ncols - c) {
        case 3: hearth_q8_0_cols(nb, 3, s + c * bs, bs, x, (const char *) vy + c * by, by); break;
        case 2: hearth_q8_0_cols(nb, 2, s + c * bs, bs, x, (const char *) vy + c * by, by); break;
        case 1: hearth_q8_0_cols(nb, 1, s + c * bs, bs, x, (const char *) vy + c * by, by); break;
        default: break;
    }
}
