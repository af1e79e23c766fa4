// The ARM64 variants of the VidKV codecs' kernel table (sign1_kernels.h): the NEON kernels of
// sign1_planes_arm.cpp and ternary_*_arm.cpp; the ternary accumulate's dots by smull + sadalp
// (neon) or sdot (dotprod, ternary_tiles_dotprod.cpp). mixk's per-block row weights and query
// split and the real-FFT product keep their scalar references here (no NEON port yet).
#include "kv/codecs/mixk_kernels.h"
#include "kv/codecs/real_fft_kernels.h"
#include "kv/codecs/sign1_kernels.h"
#include "kv/codecs/sign1_planes.h"

namespace vlkv::sign1 {

const Sign1Kernels kSign1Neon{plane_scores_rows_neon, mixk_plane_scores_rows_neon, plane_sums_neon,
                              mixk::row_weights_scalar, mixk::split_query_scalar, real_fft_kernels::axpy_rows_scalar,
                              nullptr, ternt::decode_tiles_neon, ternt::accum_tiles_neon, ternt::tile_scores_neon,
                              ternt::row_scores_neon, ternt::row_accum_neon, load_f16_row_neon};
const Sign1Kernels kSign1Dotprod{plane_scores_rows_neon, mixk_plane_scores_rows_neon, plane_sums_neon,
                                 mixk::row_weights_scalar, mixk::split_query_scalar,
                                 real_fft_kernels::axpy_rows_scalar, nullptr, ternt::decode_tiles_neon,
                                 ternt::accum_tiles_dotprod, ternt::tile_scores_neon, ternt::row_scores_neon,
                                 ternt::row_accum_neon, load_f16_row_neon};

}  // namespace vlkv::sign1
