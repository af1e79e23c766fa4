// Q8_0: blocks of 32 weights, one f16 scale d and 32 signed bytes.
// Layout (34 bytes): d | qs[32]; w = qs[j] * d.
#include "quant/block_layouts.h"
#include "base/check.h"
#include "quant/q8_0_lanes.h"
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

constexpr int64_t kQk = q8lanes::kQk;  // the layout, stated once in q8_0_lanes.h
constexpr size_t kBytes = q8lanes::kBytes;
static_assert(Q8_0Layout::kBlockBytes == kBytes && Q8_0Layout::kBlockElems == kQk);  // the SIMD decoders' view

void dequantize_ref(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, dst += kQk) {
    const float d = load_half(p);
    const auto* qs = reinterpret_cast<const int8_t*>(p + 2);
    for (int j = 0; j < kQk; ++j) dst[j] = static_cast<float>(qs[j]) * d;
  }
}

// ggml's quantize_row_q8_0_ref: d = amax / 127, codes rounded half away from zero.
void quantize_ref(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, src += kQk) {
    float amax = 0.0f;
    for (int j = 0; j < kQk; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_half(p, d);
    for (int j = 0; j < kQk; ++j) {
      p[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(src[j] * id)));
    }
  }
}

// The scalar tier: the reference dot; strided and lanes are the contract's definitions,
// dot by dot (min_lane_rows 0: matmul calls dot_q8 directly).
float dot_q8_ref(const void* row, const Q8Activations& x, int64_t n) {
  return dot_q8_scalar<dequantize_ref, kQk, kBytes>(row, x, n);
}
void dot_q8_strided_ref(const void* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  for (int r = 0; r < n_rows; ++r) out[r] = dot_q8_ref(static_cast<const uint8_t*>(base) + r * stride, x, n);
}
void dot_q8_lanes_ref(const void* const* rows, int n_rows, const Q8Lanes& x, int64_t n, float* out) {
  for (int i = 0; i < n_rows; ++i)
    for (int l = 0; l < x.n_rows; ++l) out[i * q8lanes::kLanes + l] = dot_q8_ref(rows[i], *x.rows[l], n);
}
const FormatKernels kScalar = {dequantize_ref, dot_scalar<dequantize_ref, kQk, kBytes>, dot_q8_ref, dot_q8_strided_ref,
                               dot_q8_lanes_ref};

const FormatKernels& kernels() {
  static const SimdTable<FormatKernels> table(
      VLKV_SIMD_VARIANTS(&kScalar, kQ8_0, avx2, avx2_vnni, avx512, avx512_vnni, neon, dotprod));
  return table.get();
}

// The contract's bounds (q8_0_lanes.h), checked once here for every tier.
void dot_q8_strided(const void* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  VLKV_CHECK(n_rows >= 1 && n_rows <= q8lanes::kLanes && stride >= 0 &&
             stride * (q8lanes::kLanes - 1) < (int64_t{1} << 31));
  kernels().dot_q8_strided(base, stride, n_rows, x, n, out);
}
void dot_q8_lanes(const void* const* rows, int n_rows, const Q8Lanes& x, int64_t n, float* out) {
  VLKV_CHECK(n_rows >= 1 && n_rows <= kMaxLaneWeightRows && x.n == n && x.n_rows >= 1);
  kernels().dot_q8_lanes(rows, n_rows, x, n, out);
}

}  // namespace

const WeightFormat kQ8_0Format = {GgmlType::kQ8_0, "q8_0", kQk, kBytes, dequantize_ref, quantize_ref,
                                  Dispatched<kernels>::dequantize, Dispatched<kernels>::dot,
                                  Dispatched<kernels>::dot_q8, dot_q8_strided, dot_q8_lanes, kernels};

}  // namespace vlkv::quant
