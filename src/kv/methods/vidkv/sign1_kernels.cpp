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
  static const SimdTable<Sign1Kernels> t({.scalar = &kScalar,
                                          .avx2 = VLKV_X86(&kSign1Avx2),
                                          .avx2_vnni = VLKV_X86(&kSign1Avx2Vnni),
                                          .avx512 = VLKV_X86(&kSign1Avx512),
                                          .avx512_vnni = VLKV_X86(cpu_features().avx512vbmi ? &kSign1Avx512Vbmi
                                                                                     : &kSign1Avx512Vnni),
                                          .neon = VLKV_ARM(&kSign1Neon),
                                          .dotprod = VLKV_ARM(&kSign1Dotprod)});
  return t;
}

}  // namespace

const Sign1Kernels& sign1_kernels() { return table().get(); }
const Sign1Kernels& sign1_kernels_at(SimdTier tier) { return table().at(tier); }

}  // namespace vlkv::sign1
