// Dispatch table of the Walsh-Hadamard transform (wht.h). Internal to codecs/.
#pragma once

#include <cstdint>

namespace vlkv {

struct WhtKernels {
  void (*rows)(float* x, int64_t n, int d) = nullptr;  // x: [n, d], d a power of two
};

extern const WhtKernels kWhtKernelsAvx2;
extern const WhtKernels kWhtKernelsNeon;  // wht_arm.cpp (every ARM64 tier)

}  // namespace vlkv
