#include "base/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace vlkv {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.f16c = __builtin_cpu_supports("f16c");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  f.avx512vpopcntdq = __builtin_cpu_supports("avx512vpopcntdq");
#endif
  return f;
}

SimdLevel hardware_level() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.avx2 && f.fma && f.f16c)
    return SimdLevel::kAvx512;
  if (f.avx2 && f.fma && f.f16c) return SimdLevel::kAvx2;
  return SimdLevel::kScalar;
}

SimdLevel initial_level() {
  SimdLevel hw = hardware_level();
  const char* env = std::getenv("VLKV_SIMD");
  if (!env) return hw;
  SimdLevel want = hw;
  if (std::strcmp(env, "scalar") == 0) want = SimdLevel::kScalar;
  else if (std::strcmp(env, "avx2") == 0) want = SimdLevel::kAvx2;
  else if (std::strcmp(env, "avx512") == 0) want = SimdLevel::kAvx512;
  return want < hw ? want : hw;
}

std::atomic<int>& level_slot() {
  static std::atomic<int> level{static_cast<int>(initial_level())};
  return level;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

SimdLevel simd_level() { return static_cast<SimdLevel>(level_slot().load(std::memory_order_relaxed)); }

void set_simd_level_for_testing(SimdLevel level) {
  SimdLevel hw = hardware_level();
  level_slot() = static_cast<int>(level < hw ? level : hw);
}

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar: return "scalar";
    case SimdLevel::kAvx2: return "avx2";
    case SimdLevel::kAvx512: return "avx512";
  }
  return "?";
}

}  // namespace vlkv
