#include "quant/q8_activations.h"

#include <algorithm>
#include <cmath>

#include "base/fp16.h"

namespace vlkv {

void quantize_activations_q8(const float* x, int64_t n, Q8Activations& out) {
  out.n = n;
  out.q.resize(static_cast<size_t>(n));
  out.d.resize(static_cast<size_t>(n / 32));
  out.half_sum.resize(static_cast<size_t>(n / 16));
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    // As ggml's quantize_row_q8_0: codes use the f32 scale, the stored scale is its f16.
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t s0 = 0, s1 = 0;
    for (int j = 0; j < 32; ++j) {
      const int8_t q = static_cast<int8_t>(std::lround(xb[j] * id));
      out.q[static_cast<size_t>(b * 32 + j)] = q;
      (j < 16 ? s0 : s1) += q;
    }
    out.d[static_cast<size_t>(b)] = fp16_to_fp32(fp32_to_fp16(d));
    out.half_sum[static_cast<size_t>(2 * b)] = s0;
    out.half_sum[static_cast<size_t>(2 * b + 1)] = s1;
  }
}

}  // namespace vlkv
