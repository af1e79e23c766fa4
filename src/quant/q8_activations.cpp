#include "quant/q8_activations.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/fp16.h"
#include "base/simd_dispatch.h"
#include "quant/q8_activations_kernels.h"

namespace vlkv {
namespace {

void quantize_block_scalar(const float* xb, int8_t* q, float* d, int32_t* half_sum) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
  const float scale = q8_block_scale(amax);
  const float id = scale != 0.0f ? 1.0f / scale : 0.0f;
  int32_t s0 = 0, s1 = 0;
  for (int j = 0; j < 32; ++j) {
    q[j] = static_cast<int8_t>(std::lround(xb[j] * id));
    (j < 16 ? s0 : s1) += q[j];
  }
  *d = fp16_to_fp32(fp32_to_fp16(scale));
  half_sum[0] = s0;
  half_sum[1] = s1;
}

// One block of 32 rounded (the same codes, scale and sums at every tier).
QuantizeQ8BlockFn quantize_block() {
  static const QuantizeQ8BlockFn kScalar = quantize_block_scalar;
  static const SimdTable<QuantizeQ8BlockFn> table(VLKV_SIMD_VARIANTS(&kScalar, kQuantizeQ8Block, avx2, neon));
  return table.get();
}

}  // namespace

void quantize_activations_q8(const float* x, int64_t n, Q8Activations& out) {
  out.n = n;
  out.q.resize(static_cast<size_t>(n));
  out.d.resize(static_cast<size_t>(n / 32));
  out.half_sum.resize(static_cast<size_t>(n / 16));
  out.xsum_d.resize(static_cast<size_t>(n / 32));
  const QuantizeQ8BlockFn quantize = quantize_block();
  for (int64_t b = 0; b < n / 32; ++b) {
    int8_t* q = out.q.data() + b * 32;
    float* d = out.d.data() + b;
    int32_t* hs = out.half_sum.data() + 2 * b;
    quantize(x + b * 32, q, d, hs);
    out.xsum_d[static_cast<size_t>(b)] = *d * static_cast<float>(hs[0] + hs[1]);
  }
}

void interleave_q8_lanes(const Q8Activations* const* rows, int n_rows, Q8Lanes& out) {
  VLKV_CHECK(n_rows >= 1 && n_rows <= kLaneRows);
  const int64_t n = rows[0]->n, nb = n / 32;
  constexpr int kLanes = kLaneRows + 1;
  out.n = n;
  out.n_rows = n_rows;
  out.codes.assign(static_cast<size_t>(nb * 8 * kLanes), 0x80808080u);
  out.d.assign(static_cast<size_t>(nb * kLanes), 0.0f);
  for (int l = 0; l < n_rows; ++l) {
    VLKV_CHECK(rows[l]->n == n);
    out.rows[l] = rows[l];
    const int8_t* q = rows[l]->q.data();
    for (int64_t k = 0; k < nb * 8; ++k) {  // dword k of the row -> lane l of vector k
      uint32_t v;
      std::memcpy(&v, q + 4 * k, 4);
      out.codes[static_cast<size_t>(k * kLanes + l)] = v ^ 0x80808080u;
    }
    for (int64_t b = 0; b < nb; ++b) out.d[static_cast<size_t>(b * kLanes + l)] = rows[l]->d[static_cast<size_t>(b)];
  }
}

}  // namespace vlkv
