// Which SIMD instruction sets this CPU has, detected once at run time, and the dispatch
// tier the kernels run at (base/simd_dispatch.h): nothing assumes the build machine's CPU.
#pragma once

#include <vector>

namespace vlkv {

// Vector width family: what most kernels branch on.
enum class SimdLevel {
  kScalar = 0,
  kAvx2 = 1,    // AVX2 + FMA + F16C
  kAvx512 = 2,  // AVX-512 F/BW/DQ/VL (+ AVX2 level)
  kNeon = 3,    // ARM64 Advanced SIMD, 128-bit (every ARMv8-A core)
};

// Dispatch tier: a width plus its 8-bit dot-product instruction (vpdpbusd, sdot), when the
// CPU has it. x86 tiers are not a chain: AVX-512 VNNI CPUs (Ice Lake, Zen 4) may lack
// AVX-VNNI, AVX-VNNI CPUs (Alder Lake) lack AVX-512. A tier a kernel family does not provide
// falls back along simd_tier_fallback(). A CPU has the tiers of one architecture only.
enum class SimdTier {
  kScalar = 0,
  kAvx2 = 1,        // AVX2 + FMA + F16C (Haswell, Zen 1-3)
  kAvx2Vnni = 2,    // + AVX-VNNI: 256-bit vpdpbusd (Alder Lake, Zen 4+), CPUID 7.1 EAX bit 4
  kAvx512 = 3,      // AVX-512 F/BW/DQ/VL (Skylake-X)
  kAvx512Vnni = 4,  // + AVX512_VNNI (Cascade Lake, Ice Lake, Zen 4+)
  kNeon = 5,        // ARM64 Advanced SIMD (all ARMv8-A: Cortex-A72, Raspberry Pi 4)
  kDotprod = 6,     // + ARMv8.2 dotprod: sdot/udot (Neoverse N1, Graviton 2, Cortex-A76, Pi 5)
  kI8mm = 7,        // + ARMv8.6 i8mm: smmla/usdot (Neoverse V1/N2, Graviton 3/4, Apple M2+)
};
constexpr int kSimdTierCount = 8;

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx_vnni = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avx512vpopcntdq = false;
  bool avx512vbmi = false;  // vpermi2b: kernels of the avx512vnni tier use it where present
  // ARM64, from getauxval(AT_HWCAP / AT_HWCAP2).
  bool neon = false;     // HWCAP_ASIMD
  bool dotprod = false;  // HWCAP_ASIMDDP
  bool i8mm = false;     // HWCAP2_I8MM
};

const CpuFeatures& cpu_features();

// The tier kernels run at: the best one the CPU has, capped by VLKV_SIMD in the
// environment (scalar | avx2 | avx2vnni | avx512 | avx512vnni on x86,
// scalar | neon | dotprod | i8mm on ARM64; for tests of every path
// on one machine, for benchmarks of what a smaller CPU would run, and for debugging).
// A requested tier the CPU lacks falls back along simd_tier_fallback().
SimdTier simd_tier();
// Width of simd_tier().
SimdLevel simd_level();
// Whether simd_tier() has vpdpbusd at its width.
bool simd_vnni();

bool simd_tier_supported(SimdTier tier);
// Next tier to try when `tier` is missing (CPU or kernel family): avx512vnni -> avx512 ->
// avx2 -> scalar, avx2vnni -> avx2; i8mm -> dotprod -> neon -> scalar. kScalar
// returns itself.
SimdTier simd_tier_fallback(SimdTier tier);
// Every tier this CPU supports, scalar first (tests loop over it).
std::vector<SimdTier> supported_simd_tiers();
// Every width this CPU supports, scalar first.
std::vector<SimdLevel> supported_simd_levels();

// Tests force a tier to compare every path with the scalar reference; a tier the CPU lacks
// falls back. set_simd_level_for_testing picks the best tier of that width (kAvx512 on a
// VNNI CPU is kAvx512Vnni, kNeon on a dotprod CPU kDotprod or kI8mm).
void set_simd_tier_for_testing(SimdTier tier);
// The best tier of the CPU, capped by VLKV_SIMD (what simd_tier() starts at; tests restore it).
SimdTier simd_tier_default();
void set_simd_level_for_testing(SimdLevel level);
const char* simd_level_name(SimdLevel level);
const char* simd_tier_name(SimdTier tier);  // the VLKV_SIMD spelling

}  // namespace vlkv
