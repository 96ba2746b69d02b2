// Hearth (installers/llama_build.py REPACK_PATCHES): added to ggml-cpu/repack.cpp. Below
// hearth_exact_rows (a verify batch), repacked Q4_K weights multiply each column as a single token's
// gemv does (hearth_gemv_q4_K_8x8_q8_K_cols, llama_patches/q4_K_8x8_columns.c), so the batch's
// activations are also quantized row by row, as a single token's are, never four rows interleaved.
#include <type_traits>
extern "C" int hearth_exact_rows;  // tiled.cpp

template <typename BLOC_TYPE, int64_t INTER_SIZE, int64_t NB_COLS>
static bool hearth_columns(int64_t rows) {
#if defined(__AVX2__) && (defined(__x86_64__) || defined(_M_X64))
    return std::is_same<BLOC_TYPE, block_q4_K>::value && INTER_SIZE == 8 && NB_COLS == 8 && rows < hearth_exact_rows;
#else
    UNUSED(rows);
    return false;
#endif
}

template <typename BLOC_TYPE, int64_t INTER_SIZE, int64_t NB_COLS>
static int64_t hearth_interleaved_rows(int64_t rows) {
    return hearth_columns<BLOC_TYPE, INTER_SIZE, NB_COLS>(rows) ? 0 : rows - rows % 4;
}

