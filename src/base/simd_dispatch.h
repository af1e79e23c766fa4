// One dispatch point per kernel family: a table with one variant per SIMD tier, filled
// once, indexed by the current tier at each call (so VLKV_SIMD and the tests' forced
// tiers take effect without re-filling anything).
//
// How a kernel family is built (as ggml-cpu's per-type trait tables):
//  - The family is a struct of function pointers, declared in the family's header
//    (e.g. kv/codecs/int_kernels.h: `struct IntTileKernels { ... }`), together with one
//    `extern const Family kFamilyAvx2;` per ISA variant it has.
//  - Each ISA's kernels live in their own .cpp file (`<family>_avx2.cpp`,
//    `<family>_avx2vnni.cpp`, `<family>_avx512vnni.cpp`), which defines that variant.
//    The file includes every header it needs first, then opens VLKV_TARGET_BEGIN(...)
//    and closes it with VLKV_TARGET_END at the bottom: every function defined in between
//    is compiled for that ISA, nothing outside it is.
//    Why a target region and not per-file -mavx2 flags: with per-file flags, inline
//    functions and templates from shared headers (std::, base/) instantiated in that file
//    would be AVX2 code the linker may pick for generic callers (a SIGILL on an older
//    CPU). Inside a region only what is *declared* in the region gets the target; headers
//    included above it stay generic. Headers holding ISA kernels meant to be shared by
//    two ISA files (say AVX2 and AVX-VNNI, one template with a dot-product policy) are
//    included inside the region and must wrap their contents in an unnamed namespace, so
//    each file's copy stays its own.
//  - The scalar reference is the family's fallback and is always present.
//  - The family's accessor holds one static SimdTable and returns table.get():
//        const IntTileKernels& int_tile_kernels() {
//          static const SimdTable<IntTileKernels> t(&kScalar, &kAvx2, &kAvx2Vnni, nullptr, &kAvx512Vnni);
//          return t.get();
//        }
//    A null variant falls back along simd_tier_fallback() (avx512vnni -> avx512 -> avx2 ->
//    scalar, avx2vnni -> avx2), so a family adds a tier only where it pays.
//  - A family may leave single entries null (e.g. no kernel for some bit width): callers then take
//    the family's generic path, and say so in the header.
#pragma once

#include <array>

#include "base/check.h"
#include "base/cpu_features.h"

#if defined(__clang__)
#define VLKV_TARGET_BEGIN(isa) _Pragma(VLKV_TARGET_STR(clang attribute push(__attribute__((target(isa))), apply_to = function)))
#define VLKV_TARGET_END _Pragma("clang attribute pop")
#else
#define VLKV_TARGET_BEGIN(isa) _Pragma("GCC push_options") _Pragma(VLKV_TARGET_STR(GCC target(isa)))
#define VLKV_TARGET_END _Pragma("GCC pop_options")
#endif
#define VLKV_TARGET_STR(x) #x

// The feature strings of the tiers (pass to VLKV_TARGET_BEGIN).
#define VLKV_ISA_AVX2 "avx2,fma,f16c"
#define VLKV_ISA_AVX2_VNNI "avx2,fma,f16c,avxvnni"
#define VLKV_ISA_AVX512 "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c"
#define VLKV_ISA_AVX512_VNNI "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c"

namespace vlkv {

template <class Family>
class SimdTable {
 public:
  // One variant per tier (null: none of its own); scalar must be given.
  SimdTable(const Family* scalar, const Family* avx2, const Family* avx2_vnni, const Family* avx512,
            const Family* avx512_vnni) {
    VLKV_CHECK(scalar != nullptr);
    const Family* given[kSimdTierCount] = {scalar, avx2, avx2_vnni, avx512, avx512_vnni};
    for (int t = 0; t < kSimdTierCount; ++t) {
      SimdTier at = static_cast<SimdTier>(t);
      while (!given[static_cast<int>(at)]) at = simd_tier_fallback(at);
      by_tier_[t] = given[static_cast<int>(at)];
    }
  }
  // The variant of the current tier (simd_tier()); one relaxed atomic load.
  const Family& get() const { return *by_tier_[static_cast<int>(simd_tier())]; }
  const Family& at(SimdTier tier) const { return *by_tier_[static_cast<int>(tier)]; }

 private:
  std::array<const Family*, kSimdTierCount> by_tier_{};
};

}  // namespace vlkv
