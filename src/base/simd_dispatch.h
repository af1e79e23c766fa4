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
//  - The family's accessor holds one static SimdTable and returns table.get(). Its variants
//    are named by convention, the family's prefix then the tier (kIntTileKernelsAvx2,
//    kIntTileKernelsAvx2Vnni, kIntTileKernelsAvx512, kIntTileKernelsAvx512Vnni,
//    kIntTileKernelsNeon, kIntTileKernelsDotprod, kIntTileKernelsI8mm), so the accessor lists
//    only the tiers the family has, by SimdVariants' field names in their order:
//        const IntTileKernels& int_tile_kernels() {
//          static const SimdTable<IntTileKernels> t(
//              VLKV_SIMD_VARIANTS(&kScalar, kIntTileKernels, avx2, avx2_vnni, avx512_vnni, neon, dotprod));
//          return t.get();
//        }
//    Each x86 tier names its variant only on x86 (VLKV_X86), each ARM tier only on ARM
//    (VLKV_ARM), nullptr elsewhere: the generic file builds everywhere while the ISA files
//    build only where they belong (CMakeLists.txt picks them by name: *_avx2*.cpp,
//    *_avx512*.cpp, *_avxvnni*.cpp and *_x86.cpp on x86-64; *_neon*.cpp, *_dotprod*.cpp,
//    *_i8mm*.cpp and *_arm.cpp on ARM64). A family whose variant is picked otherwise (by a CPU
//    feature that is no tier) replaces that field of the SimdVariants (vidkv/sign1_kernels.cpp);
//    formats built by one template take their variants as template arguments
//    (quant/legacy_blocks.cpp, quant/float_formats.cpp), and the K-quants keep theirs in a
//    constexpr SimdVariants (quant/scale_min_k.cpp: format_table<&kQ4Tiers>).
//    A null variant falls back along simd_tier_fallback() (avx512vnni -> avx512 -> avx2 ->
//    scalar, avx2vnni -> avx2, i8mm -> dotprod -> neon -> scalar), so a
//    family adds a tier only where it pays.
//  - A family may leave single entries null (e.g. no kernel for some bit width): callers then take
//    the family's generic path, and say so in the header.
//  - Nothing outside a table's accessor asks which tier runs: callers never branch on
//    simd_tier()/simd_level() to pick code (the CLI and benchmarks only print it).
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
// One function compiled for an ISA (the region form above is for whole files):
// VLKV_TARGET(VLKV_ISA_AVX2) float dot_avx2(...).
#define VLKV_TARGET(isa) __attribute__((target(isa)))

// The feature strings of the tiers (pass to VLKV_TARGET_BEGIN).
#define VLKV_ISA_AVX2 "avx2,fma,f16c"
#define VLKV_ISA_AVX2_VNNI "avx2,fma,f16c,avxvnni"
#define VLKV_ISA_AVX512 "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c"
#define VLKV_ISA_AVX512_VNNI "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c"
#define VLKV_ISA_AVX512_VBMI "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c"
// ARM64: Advanced SIMD is baseline (no target needed); the extensions are opt-in.
#define VLKV_ISA_DOTPROD "arch=armv8.2-a+dotprod"
#define VLKV_ISA_I8MM "arch=armv8.2-a+dotprod+i8mm"

// A variant pointer on its own architecture, nullptr elsewhere (its file is not built there).
#if defined(__x86_64__) || defined(__i386__)
#define VLKV_X86(variant) (variant)
#else
#define VLKV_X86(variant) nullptr
#endif
#if defined(__aarch64__)
#define VLKV_ARM(variant) (variant)
#else
#define VLKV_ARM(variant) nullptr
#endif

// VLKV_SIMD_VARIANTS(scalar, prefix, tier...): the SimdVariants of a family's scalar variant
// and the variants <prefix><Tier> of the tiers listed (see the top of this file); a scalar
// written with commas (template arguments) goes in parentheses.
#define VLKV_SIMD_VARIANTS(scalar_variant, prefix, ...) \
  {.scalar = (scalar_variant), VLKV_SIMD_EACH(VLKV_SIMD_COUNT(__VA_ARGS__), prefix, __VA_ARGS__)}
#define VLKV_SIMD_VARIANT_avx2(p) .avx2 = VLKV_X86(&p##Avx2)
#define VLKV_SIMD_VARIANT_avx2_vnni(p) .avx2_vnni = VLKV_X86(&p##Avx2Vnni)
#define VLKV_SIMD_VARIANT_avx512(p) .avx512 = VLKV_X86(&p##Avx512)
#define VLKV_SIMD_VARIANT_avx512_vnni(p) .avx512_vnni = VLKV_X86(&p##Avx512Vnni)
#define VLKV_SIMD_VARIANT_neon(p) .neon = VLKV_ARM(&p##Neon)
#define VLKV_SIMD_VARIANT_dotprod(p) .dotprod = VLKV_ARM(&p##Dotprod)
#define VLKV_SIMD_VARIANT_i8mm(p) .i8mm = VLKV_ARM(&p##I8mm)
// Applies VLKV_SIMD_VARIANT_<tier> to each of up to 7 tiers (one per SimdVariants field).
#define VLKV_SIMD_COUNT(...) VLKV_SIMD_COUNT_(__VA_ARGS__, 7, 6, 5, 4, 3, 2, 1, 0)
#define VLKV_SIMD_COUNT_(a, b, c, d, e, f, g, n, ...) n
#define VLKV_SIMD_EACH(n, p, ...) VLKV_SIMD_EACH_(n, p, __VA_ARGS__)
#define VLKV_SIMD_EACH_(n, p, ...) VLKV_SIMD_EACH_##n(p, __VA_ARGS__)
#define VLKV_SIMD_EACH_1(p, t) VLKV_SIMD_VARIANT_##t(p)
#define VLKV_SIMD_EACH_2(p, t, ...) VLKV_SIMD_VARIANT_##t(p), VLKV_SIMD_EACH_1(p, __VA_ARGS__)
#define VLKV_SIMD_EACH_3(p, t, ...) VLKV_SIMD_VARIANT_##t(p), VLKV_SIMD_EACH_2(p, __VA_ARGS__)
#define VLKV_SIMD_EACH_4(p, t, ...) VLKV_SIMD_VARIANT_##t(p), VLKV_SIMD_EACH_3(p, __VA_ARGS__)
#define VLKV_SIMD_EACH_5(p, t, ...) VLKV_SIMD_VARIANT_##t(p), VLKV_SIMD_EACH_4(p, __VA_ARGS__)
#define VLKV_SIMD_EACH_6(p, t, ...) VLKV_SIMD_VARIANT_##t(p), VLKV_SIMD_EACH_5(p, __VA_ARGS__)
#define VLKV_SIMD_EACH_7(p, t, ...) VLKV_SIMD_VARIANT_##t(p), VLKV_SIMD_EACH_6(p, __VA_ARGS__)

namespace vlkv {

// A family's variants by tier (null: none of its own); scalar must be given.
template <class Family>
struct SimdVariants {
  const Family* scalar = nullptr;
  const Family* avx2 = nullptr;
  const Family* avx2_vnni = nullptr;
  const Family* avx512 = nullptr;
  const Family* avx512_vnni = nullptr;
  const Family* neon = nullptr;
  const Family* dotprod = nullptr;
  const Family* i8mm = nullptr;
};

template <class Family>
class SimdTable {
 public:
  explicit SimdTable(const SimdVariants<Family>& v) {
    VLKV_CHECK(v.scalar != nullptr);
    const Family* given[kSimdTierCount] = {v.scalar,      v.avx2, v.avx2_vnni, v.avx512,
                                           v.avx512_vnni, v.neon, v.dotprod,   v.i8mm};
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
