// Q8_0's ARM64 kernels (q8_0.cpp has the layout and the reference): its block decoder for
// the NEON loops of simd_blocks_arm.h, and its 8-bit dots in q8_0_lanes.h's block order
// (per block: the exact int32 sum, then acc = fma(f32(sum), dw * dx, acc), as every x86 tier).
#include "quant/block_layouts.h"
#include "quant/simd_blocks_arm.h"
#include "quant/q8_0_lanes.h"

namespace vlkv::quant {
namespace {

constexpr int64_t kQk = q8lanes::kQk;
constexpr size_t kBytes = q8lanes::kBytes;

struct Traits : Q8_0Layout {
  static void decode(const uint8_t* p, Group32Arm* g) {
    g->q[0] = vld1q_s8(reinterpret_cast<const int8_t*>(p + 2));
    g->q[1] = vld1q_s8(reinterpret_cast<const int8_t*>(p + 18));
    g->s0 = g->s1 = load_half(p);
    g->b0 = g->b1 = 0.0f;
  }
};

// One block's exact sum of 32 products.
inline int32_t block_sum_neon(const int8_t* w, const int8_t* x) {
  return vaddvq_s32(vaddq_s32(quad_sums_neon(vld1q_s8(w), vld1q_s8(x)), quad_sums_neon(vld1q_s8(w + 16), vld1q_s8(x + 16))));
}
VLKV_TARGET(VLKV_ISA_DOTPROD) inline int32_t block_sum_dotprod(const int8_t* w, const int8_t* x) {
  return vaddvq_s32(vdotq_s32(vdotq_s32(vdupq_n_s32(0), vld1q_s8(w), vld1q_s8(x)), vld1q_s8(w + 16), vld1q_s8(x + 16)));
}

#define VLKV_DEFINE_Q8_0_DOT(NAME, TARGET, BLOCK_SUM)                                                  \
  TARGET float NAME(const void* row, const Q8Activations& x, int64_t n) {                               \
    const auto* p = static_cast<const uint8_t*>(row);                                                   \
    float acc = 0.0f;                                                                                   \
    for (int64_t b = 0; b < n / kQk; ++b, p += kBytes) {                                                \
      const int32_t s = BLOCK_SUM(reinterpret_cast<const int8_t*>(p + 2), x.q.data() + b * kQk);        \
      acc = std::fma(static_cast<float>(s), load_half(p) * x.d[static_cast<size_t>(b)], acc);           \
    }                                                                                                   \
    return acc;                                                                                         \
  }
VLKV_DEFINE_Q8_0_DOT(dot_q8_neon, , block_sum_neon)
VLKV_DEFINE_Q8_0_DOT(dot_q8_dotprod, VLKV_TARGET(VLKV_ISA_DOTPROD), block_sum_dotprod)
#undef VLKV_DEFINE_Q8_0_DOT

// The lane kernels as the contract defines them, dot by dot (min_lane_rows 0: matmul calls
// dot_q8 directly); a many-row i8mm (smmla) kernel is the next step where it pays.
template <float (*Dot)(const void*, const Q8Activations&, int64_t)>
void strided(const void* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  for (int r = 0; r < n_rows; ++r) out[r] = Dot(static_cast<const uint8_t*>(base) + r * stride, x, n);
}
template <float (*Dot)(const void*, const Q8Activations&, int64_t)>
void lanes(const void* const* rows, int n_rows, const Q8Lanes& x, int64_t n, float* out) {
  for (int i = 0; i < n_rows; ++i)
    for (int l = 0; l < x.n_rows; ++l) out[i * q8lanes::kLanes + l] = Dot(rows[i], *x.rows[l], n);
}

}  // namespace

const FormatKernels kQ8_0Neon = {dequantize_neon<Traits>, dot_neon<Traits>, dot_q8_neon, strided<dot_q8_neon>,
                                 lanes<dot_q8_neon>};
const FormatKernels kQ8_0Dotprod = {dequantize_neon<Traits>, dot_neon<Traits>, dot_q8_dotprod,
                                    strided<dot_q8_dotprod>, lanes<dot_q8_dotprod>};

}  // namespace vlkv::quant
