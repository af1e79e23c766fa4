#include "kv/methods/vidkv/sign1_kernels.h"

#include "base/simd_dispatch.h"
#include "kv/methods/vidkv/mixk_kernels.h"
#include "kv/methods/vidkv/real_fft_kernels.h"
#include "kv/methods/vidkv/sign1_planes.h"

namespace vlkv::sign1 {
namespace {

const SimdTable<Sign1Kernels>& table() {
  static const Sign1Kernels kScalar{plane_scores_rows_scalar, nullptr, plane_sums_scalar, mixk::row_weights_scalar,
                                    mixk::split_query_scalar, real_fft_kernels::axpy_rows_scalar, nullptr,
                                    nullptr, nullptr, nullptr, nullptr, nullptr, load_f16_row_scalar};
  // AVX-512 VBMI is no tier of its own: the avx512vnni variant uses it where the CPU has it.
  static const SimdTable<Sign1Kernels> t([] {
    SimdVariants<Sign1Kernels> v =
        VLKV_SIMD_VARIANTS(&kScalar, kSign1, avx2, avx2_vnni, avx512, avx512_vnni, neon, dotprod);
    if (cpu_features().avx512vbmi) v.avx512_vnni = VLKV_X86(&kSign1Avx512Vbmi);
    return v;
  }());
  return t;
}

}  // namespace

const Sign1Kernels& sign1_kernels() { return table().get(); }
const Sign1Kernels& sign1_kernels_at(SimdTier tier) { return table().at(tier); }

}  // namespace vlkv::sign1
