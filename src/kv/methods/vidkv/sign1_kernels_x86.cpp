// The x86 variants of the VidKV codecs' kernel table (sign1_kernels.h), from the kernels of
// sign1_planes_*, mixk_kernels_*, real_fft_kernels_* and ternary_*_* (AVX2, AVX-VNNI, AVX-512).
#include "kv/methods/vidkv/mixk_kernels.h"
#include "kv/methods/vidkv/real_fft_kernels.h"
#include "kv/methods/vidkv/sign1_kernels.h"
#include "kv/methods/vidkv/sign1_planes.h"

namespace vlkv::sign1 {

const Sign1Kernels kSign1Avx2{plane_scores_rows_avx2, mixk_plane_scores_rows_avx2, plane_sums_avx2,
                              mixk::row_weights_avx2, mixk::split_query_avx2, real_fft_kernels::axpy_rows_avx2,
                              real_fft_kernels::fft_forward_batch8_avx2, ternt::decode_tiles_avx2,
                              ternt::accum_tiles_avx2, ternt::tile_scores_avx2, ternt::row_scores_avx2,
                              ternt::row_accum_avx2, load_f16_row_f16c};
// AVX-VNNI: vpdpbusd for the ternary accumulate.
const Sign1Kernels kSign1Avx2Vnni{plane_scores_rows_avx2, mixk_plane_scores_rows_avx2, plane_sums_avx2,
                                  mixk::row_weights_avx2, mixk::split_query_avx2, real_fft_kernels::axpy_rows_avx2,
                                  real_fft_kernels::fft_forward_batch8_avx2, ternt::decode_tiles_avx2,
                                  ternt::accum_tiles_avxvnni, ternt::tile_scores_avx2, ternt::row_scores_avx2,
                                  ternt::row_accum_avx2, load_f16_row_f16c};
// AVX-512 without VNNI keeps the AVX2 ternary kernels (its 512-bit ones need VNNI + VBMI).
const Sign1Kernels kSign1Avx512{plane_scores_rows_avx512, mixk_plane_scores_rows_avx512, plane_sums_avx512,
                                mixk::row_weights_avx512, mixk::split_query_avx512,
                                real_fft_kernels::axpy_rows_avx512, real_fft_kernels::fft_forward_batch8_avx2,
                                ternt::decode_tiles_avx2, ternt::accum_tiles_avx2, ternt::tile_scores_avx2,
                                ternt::row_scores_avx2, ternt::row_accum_avx2, load_f16_row_f16c};
// AVX-512 VNNI: the 512-bit ternary accumulate; the digits decode with AVX2 (Cascade Lake).
const Sign1Kernels kSign1Avx512Vnni{plane_scores_rows_avx512, mixk_plane_scores_rows_avx512, plane_sums_avx512,
                                    mixk::row_weights_avx512, mixk::split_query_avx512,
                                    real_fft_kernels::axpy_rows_avx512, real_fft_kernels::fft_forward_batch8_avx2,
                                    ternt::decode_tiles_avx2, ternt::accum_tiles_avx512vnni, ternt::tile_scores_avx2,
                                    ternt::row_scores_avx2, ternt::row_accum_avx2, load_f16_row_f16c};
// + VBMI (vpermi2b), where the CPU has it: the digits decode 64 bytes at a time (Ice Lake, Zen 4).
const Sign1Kernels kSign1Avx512Vbmi{plane_scores_rows_avx512, mixk_plane_scores_rows_avx512, plane_sums_avx512,
                                    mixk::row_weights_avx512, mixk::split_query_avx512,
                                    real_fft_kernels::axpy_rows_avx512, real_fft_kernels::fft_forward_batch8_avx2,
                                    ternt::decode_tiles_avx512vbmi, ternt::accum_tiles_avx512vnni,
                                    ternt::tile_scores_avx2, ternt::row_scores_avx2, ternt::row_accum_avx2,
                                    load_f16_row_f16c};

}  // namespace vlkv::sign1
