// The ARM64 variants of the VidKV codecs' kernel table (sign1_kernels.h): the NEON kernels of
// sign1_planes_arm.cpp and ternary_*_arm.cpp; the ternary accumulate's dots by smull + sadalp
// (neon) or sdot (dotprod, ternary_tiles_dotprod.cpp); mixk's row weights and query split
// (mixk_kernels_arm.cpp) and the real-FFT product (real_fft_kernels_arm.cpp). The FFT batch of 8
// stays null (RealFft's per-vector path).
#include "kv/methods/vidkv/mixk_kernels.h"
#include "kv/methods/vidkv/real_fft_kernels.h"
#include "kv/methods/vidkv/sign1_kernels.h"
#include "kv/methods/vidkv/sign1_planes.h"

namespace vlkv::sign1 {

const Sign1Kernels kSign1Neon{plane_scores_rows_neon, mixk_plane_scores_rows_neon, plane_sums_neon,
                              mixk::row_weights_neon, mixk::split_query_neon, real_fft_kernels::axpy_rows_neon,
                              nullptr, ternt::decode_tiles_neon, ternt::accum_tiles_neon, ternt::tile_scores_neon,
                              ternt::row_scores_neon, ternt::row_accum_neon, load_f16_row_neon};
const Sign1Kernels kSign1Dotprod{plane_scores_rows_neon, mixk_plane_scores_rows_neon, plane_sums_neon,
                                 mixk::row_weights_neon, mixk::split_query_neon,
                                 real_fft_kernels::axpy_rows_neon, nullptr, ternt::decode_tiles_neon,
                                 ternt::accum_tiles_dotprod, ternt::tile_scores_neon, ternt::row_scores_neon,
                                 ternt::row_accum_neon, load_f16_row_neon};

}  // namespace vlkv::sign1
