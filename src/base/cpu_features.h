// Which SIMD instruction sets this CPU has, detected once at run time. Kernels
// compile their AVX2 / AVX-512 variants with target attributes and pick one
// through simd_level(); nothing assumes the build machine's CPU.
#pragma once

namespace vlkv {

enum class SimdLevel {
  kScalar = 0,
  kAvx2 = 1,    // AVX2 + FMA + F16C
  kAvx512 = 2,  // AVX-512 F/BW/DQ/VL (+ AVX2 level)
};

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avx512vpopcntdq = false;
};

const CpuFeatures& cpu_features();

// The best level both the CPU supports and the user allows. VLKV_SIMD=scalar|avx2|avx512
// in the environment caps it (for tests of every path on one machine, and for debugging).
SimdLevel simd_level();
// Tests force a level to compare every path with the scalar reference. Capped at what the CPU has.
void set_simd_level_for_testing(SimdLevel level);
const char* simd_level_name(SimdLevel level);

}  // namespace vlkv
