#include "base/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace vlkv {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  // F16C: CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c";
  // the fuzz build uses clang).
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) f.f16c = (c >> 29) & 1;
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  f.avx512vpopcntdq = __builtin_cpu_supports("avx512vpopcntdq");
  f.avx512vbmi = __builtin_cpu_supports("avx512vbmi");
  // AVX-VNNI: CPUID leaf 7 subleaf 1, EAX bit 4 (GCC 12's __builtin_cpu_supports lacks it).
  // The OS saves YMM state whenever AVX2 is usable, which __builtin_cpu_supports checked.
  if (f.avx2 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx_vnni = (a >> 4) & 1;
#elif defined(__aarch64__) && defined(__linux__)
  const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  f.neon = (hwcap & HWCAP_ASIMD) != 0;
  f.dotprod = (hwcap & HWCAP_ASIMDDP) != 0;
  f.i8mm = (hwcap2 & HWCAP2_I8MM) != 0;
#endif
  return f;
}

bool supported(SimdTier t) {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl;
  switch (t) {
    case SimdTier::kScalar: return true;
    case SimdTier::kAvx2: return avx2;
    case SimdTier::kAvx2Vnni: return avx2 && f.avx_vnni;
    case SimdTier::kAvx512: return avx512;
    case SimdTier::kAvx512Vnni: return avx512 && f.avx512vnni;
    case SimdTier::kNeon: return f.neon;
    case SimdTier::kDotprod: return f.neon && f.dotprod;
    case SimdTier::kI8mm: return f.neon && f.dotprod && f.i8mm;
  }
  return false;
}

SimdTier capped(SimdTier want) {
  while (!supported(want)) want = simd_tier_fallback(want);
  return want;
}

SimdTier initial_tier() {
  SimdTier want = SimdTier::kAvx512Vnni;
  if (!supported(want) && supported(SimdTier::kAvx2Vnni) && !supported(SimdTier::kAvx512)) want = SimdTier::kAvx2Vnni;
  if (cpu_features().neon) want = SimdTier::kI8mm;
  if (const char* env = std::getenv("VLKV_SIMD")) {
    for (int t = 0; t < kSimdTierCount; ++t)
      if (std::strcmp(env, simd_tier_name(static_cast<SimdTier>(t))) == 0) want = static_cast<SimdTier>(t);
    if (std::strcmp(env, "avx_vnni") == 0) want = SimdTier::kAvx2Vnni;
  }
  return capped(want);
}

SimdTier default_tier() {
  static const SimdTier tier = initial_tier();
  return tier;
}

std::atomic<int>& tier_slot() {
  static std::atomic<int> tier{static_cast<int>(default_tier())};
  return tier;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

SimdTier simd_tier_default() { return default_tier(); }

SimdTier simd_tier() { return static_cast<SimdTier>(tier_slot().load(std::memory_order_relaxed)); }

SimdLevel simd_level() {
  switch (simd_tier()) {
    case SimdTier::kScalar: return SimdLevel::kScalar;
    case SimdTier::kAvx2:
    case SimdTier::kAvx2Vnni: return SimdLevel::kAvx2;
    case SimdTier::kNeon:
    case SimdTier::kDotprod:
    case SimdTier::kI8mm: return SimdLevel::kNeon;
    default: return SimdLevel::kAvx512;
  }
}

bool simd_vnni() {
  const SimdTier t = simd_tier();
  return t == SimdTier::kAvx2Vnni || t == SimdTier::kAvx512Vnni;
}

bool simd_tier_supported(SimdTier tier) { return supported(tier); }

SimdTier simd_tier_fallback(SimdTier tier) {
  switch (tier) {
    case SimdTier::kAvx512Vnni: return SimdTier::kAvx512;
    case SimdTier::kI8mm: return SimdTier::kDotprod;
    case SimdTier::kDotprod: return SimdTier::kNeon;
    case SimdTier::kAvx512:
    case SimdTier::kAvx2Vnni: return SimdTier::kAvx2;
    default: return SimdTier::kScalar;
  }
}

std::vector<SimdTier> supported_simd_tiers() {
  std::vector<SimdTier> out;
  for (int t = 0; t < kSimdTierCount; ++t)
    if (supported(static_cast<SimdTier>(t))) out.push_back(static_cast<SimdTier>(t));
  return out;
}

std::vector<SimdLevel> supported_simd_levels() {
  std::vector<SimdLevel> out = {SimdLevel::kScalar};
  if (supported(SimdTier::kAvx2)) out.push_back(SimdLevel::kAvx2);
  if (supported(SimdTier::kAvx512)) out.push_back(SimdLevel::kAvx512);
  if (supported(SimdTier::kNeon)) out.push_back(SimdLevel::kNeon);
  return out;
}

void set_simd_tier_for_testing(SimdTier tier) { tier_slot() = static_cast<int>(capped(tier)); }

void set_simd_level_for_testing(SimdLevel level) {
  SimdTier t = SimdTier::kScalar;
  if (level == SimdLevel::kAvx2) t = SimdTier::kAvx2Vnni;
  if (level == SimdLevel::kAvx512) t = SimdTier::kAvx512Vnni;
  if (level == SimdLevel::kNeon) t = SimdTier::kI8mm;
  set_simd_tier_for_testing(t);
}

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar: return "scalar";
    case SimdLevel::kAvx2: return "avx2";
    case SimdLevel::kAvx512: return "avx512";
    case SimdLevel::kNeon: return "neon";
  }
  return "?";
}

const char* simd_tier_name(SimdTier tier) {
  switch (tier) {
    case SimdTier::kScalar: return "scalar";
    case SimdTier::kAvx2: return "avx2";
    case SimdTier::kAvx2Vnni: return "avx2vnni";
    case SimdTier::kAvx512: return "avx512";
    case SimdTier::kAvx512Vnni: return "avx512vnni";
    case SimdTier::kNeon: return "neon";
    case SimdTier::kDotprod: return "dotprod";
    case SimdTier::kI8mm: return "i8mm";
  }
  return "?";
}

}  // namespace vlkv
