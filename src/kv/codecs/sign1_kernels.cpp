#include "kv/codecs/sign1_kernels.h"

#include "base/simd_dispatch.h"
#include "kv/codecs/mixk_kernels.h"
#include "kv/codecs/real_fft_kernels.h"
#include "kv/codecs/sign1_planes.h"

namespace vlkv::sign1 {
namespace {

const SimdTable<Sign1Kernels>& table() {
  static const Sign1Kernels kScalar{plane_scores_rows_scalar, nullptr, plane_sums_scalar, mixk::row_weights_scalar,
                                    mixk::split_query_scalar, real_fft_kernels::axpy_rows_scalar, nullptr,
                                    nullptr, nullptr, nullptr, nullptr, nullptr};
  static const Sign1Kernels kAvx2{plane_scores_rows_avx2, mixk_plane_scores_rows_avx2, plane_sums_avx2, mixk::row_weights_avx2,
                                  mixk::split_query_avx2, real_fft_kernels::axpy_rows_avx2,
                                  real_fft_kernels::fft_forward_batch8_avx2,
                                  ternt::decode_tiles_avx2, ternt::accum_tiles_avx2, ternt::tile_scores_avx2,
                                  ternt::row_scores_avx2, ternt::row_accum_avx2};
  static const Sign1Kernels kAvx2Vnni = [] {
    Sign1Kernels k = kAvx2;
    k.ternary_accum = ternt::accum_tiles_avxvnni;
    return k;
  }();
  // AVX-512 without VNNI keeps the AVX2 ternary kernels (its 512-bit ones need VNNI + VBMI).
  static const Sign1Kernels kAvx512{plane_scores_rows_avx512, mixk_plane_scores_rows_avx512, plane_sums_avx512, mixk::row_weights_avx512,
                                    mixk::split_query_avx512, real_fft_kernels::axpy_rows_avx512,
                                    real_fft_kernels::fft_forward_batch8_avx2,
                                    ternt::decode_tiles_avx2, ternt::accum_tiles_avx2, ternt::tile_scores_avx2,
                                  ternt::row_scores_avx2, ternt::row_accum_avx2};
  // VBMI (vpermi2b) decodes the digits 64 bytes at a time; without it (Cascade Lake) AVX2.
  static const Sign1Kernels kAvx512Vnni = [] {
    Sign1Kernels k = kAvx512;
    k.ternary_accum = ternt::accum_tiles_avx512vnni;
    if (__builtin_cpu_supports("avx512vbmi")) k.ternary_decode = ternt::decode_tiles_avx512vbmi;
    return k;
  }();
  static const SimdTable<Sign1Kernels> t(&kScalar, &kAvx2, &kAvx2Vnni, &kAvx512, &kAvx512Vnni);
  return t;
}

}  // namespace

const Sign1Kernels& sign1_kernels() { return table().get(); }
const Sign1Kernels& sign1_kernels_at(SimdTier tier) { return table().at(tier); }

}  // namespace vlkv::sign1
