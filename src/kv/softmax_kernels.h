// Dispatch table of the online-softmax helpers of attention (attention_chunks.h):
// exp(x - m) in place with its sum, and the max of a chunk of logits. Internal to kv/.
#pragma once

#include <cstdint>

namespace vlkv::attn {

struct SoftmaxKernels {
  float (*exp_sub_sum)(float* x, int64_t n, float m) = nullptr;  // x[t] <- exp(x[t] - m); returns the sum
  float (*max)(const float* x, int64_t n) = nullptr;              // n >= 1
};

extern const SoftmaxKernels kSoftmaxKernelsAvx2;
extern const SoftmaxKernels kSoftmaxKernelsAvx512;
extern const SoftmaxKernels kSoftmaxKernelsNeon;  // softmax_kernels_arm.cpp (every ARM64 tier)

}  // namespace vlkv::attn
