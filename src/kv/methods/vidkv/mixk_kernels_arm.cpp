// NEON kernels of mixk's fused scores (mixk_kernels.h): mixk_kernels_avx2.cpp's operations in
// its order (8 lanes as two 4-lane halves, its horizontal sum, the tails in element order), so
// the plane weights and base scores are the x86 AVX2 tier's bits.
#include <arm_neon.h>

#include <array>
#include <cstdint>

#include "kv/methods/vidkv/mixk_kernels.h"

namespace vlkv::mixk {
namespace {

// The AVX2 hsum of the 8 lanes lo | hi: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
inline float hsum8(float32x4_t lo, float32x4_t hi) {
  const float32x4_t s = vaddq_f32(lo, hi);
  return (vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 2)) + (vgetq_lane_f32(s, 1) + vgetq_lane_f32(s, 3));
}

// kPack4[b]: the byte indices that move the 4-byte lanes of the set bits of b to the front
// (NEON has no compress; tbl by this row does it).
constexpr std::array<std::array<uint8_t, 16>, 16> make_pack4() {
  std::array<std::array<uint8_t, 16>, 16> t{};
  for (int b = 0; b < 16; ++b) {
    int n = 0;
    for (int i = 0; i < 4; ++i)
      if ((b >> i) & 1) {
        for (int k = 0; k < 4; ++k) t[b][4 * n + k] = static_cast<uint8_t>(4 * i + k);
        ++n;
      }
  }
  return t;
}
constexpr auto kPack4 = make_pack4();

// Stores the lanes of v selected by the 4 bits of b at dst (a whole vector), returns their count.
inline int pack4(float32x4_t v, unsigned b, float* dst) {
  const uint8x16_t idx = vld1q_u8(kPack4[b].data());
  vst1q_f32(dst, vreinterpretq_f32_u8(vqtbl1q_u8(vreinterpretq_u8_f32(v), idx)));
  return __builtin_popcount(b);
}

}  // namespace

void row_weights_neon(const float* qo, const float* qc, const float* os, const float* sig, int n_out, int nc, float* w,
                      float* base) {
  float32x4_t bo[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, bn[2] = {bo[0], bo[0]};
  int j = 0;
  for (; j + 8 <= n_out; j += 8)
    for (int h = 0; h < 2; ++h) {
      const float32x4x2_t sm = vld2q_f32(os + 2 * (j + 4 * h));  // {scale, min} pairs -> scales, mins
      const float32x4_t q = vld1q_f32(qo + j + 4 * h);
      const float32x4_t ws = vmulq_f32(q, sm.val[0]);
      bo[h] = vfmaq_f32(bo[h], q, sm.val[1]);
      vst1q_f32(w + j + 4 * h, ws);
      vst1q_f32(w + n_out + j + 4 * h, vaddq_f32(ws, ws));
    }
  float so = hsum8(bo[0], bo[1]);
  for (; j < n_out; ++j) {
    so += qo[j] * os[2 * j + 1];
    w[j] = qo[j] * os[2 * j];
    w[n_out + j] = 2.0f * w[j];
  }
  int k = 0;
  for (; k + 8 <= nc; k += 8)
    for (int h = 0; h < 2; ++h) {
      const float32x4_t qs = vmulq_f32(vld1q_f32(qc + k + 4 * h), vld1q_f32(sig + k + 4 * h));
      bn[h] = vaddq_f32(bn[h], qs);
      vst1q_f32(w + 2 * n_out + k + 4 * h, vmulq_f32(qs, vdupq_n_f32(-2.0f)));
    }
  float sn = hsum8(bn[0], bn[1]);
  for (; k < nc; ++k) {
    const float qs = qc[k] * sig[k];
    sn += qs;
    w[2 * n_out + k] = -2.0f * qs;
  }
  *base = so + sn;
}

void split_query_neon(const float* q, const uint8_t* mask, int d, float* qo, float* qn) {
  int no = 0, nn = 0, c = 0;
  for (; c + 8 <= d; c += 8) {
    const unsigned bits = mask[c / 8], inv = ~bits & 0xffu;
    for (int h = 0; h < 2; ++h) {
      const float32x4_t v = vld1q_f32(q + c + 4 * h);
      no += pack4(v, (bits >> (4 * h)) & 0xf, qo + no);
      nn += pack4(v, (inv >> (4 * h)) & 0xf, qn + nn);
    }
  }
  if (c < d) split_query_scalar(q + c, mask + c / 8, d - c, qo + no, qn + nn);  // c is a multiple of 8
}

}  // namespace vlkv::mixk
