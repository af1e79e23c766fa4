// NEON kernels of the ternary codec's row-ordered blocks (trit i = t * d + c; head_dim % 16 != 0
// or G % 4 != 0), ported from ternary_rows_avx2.cpp with the same float operations in the same
// order (8 lanes as two halves, hsum8's order; two token chains in the accumulate), so the
// results are the AVX2 tier's bits. The f32 tails of heads that are not a multiple of 8 fuse
// their multiply-adds (std::fma) as GCC contracts them in the AVX2 file.
#include <arm_neon.h>

#include <cmath>

#include "kv/methods/vidkv/ternary_tiles.h"

namespace vlkv::ternt {
namespace {

// 8 int8 codes as two 4-lane float halves.
inline void codes8(const int8_t* c, float32x4_t* lo, float32x4_t* hi) {
  const int16x8_t w = vmovl_s8(vld1_s8(c));
  *lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(w)));
  *hi = vcvtq_f32_s32(vmovl_high_s16(w));
}

}  // namespace

void row_scores_neon(const float* qs, const int8_t* codes, int G, int d, float scale, float* lr) {
  const int d8 = d & ~7;
  for (int t = 0; t < G; ++t) {
    const int8_t* c = codes + static_cast<int64_t>(t) * d;
    float32x4_t al = vdupq_n_f32(0.0f), ah = al;
    for (int i = 0; i < d8; i += 8) {
      float32x4_t cl, ch;
      codes8(c + i, &cl, &ch);
      al = vfmaq_f32(al, vld1q_f32(qs + i), cl);
      ah = vfmaq_f32(ah, vld1q_f32(qs + i + 4), ch);
    }
    const float32x4_t s4 = vaddq_f32(al, ah);
    const float32x2_t s2 = vadd_f32(vget_low_f32(s4), vget_high_f32(s4));
    float s = vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
    for (int i = d8; i < d; ++i) s = std::fma(qs[i], static_cast<float>(c[i]), s);
    lr[t] = s * scale;
  }
}

void row_accum_neon(const float* p, const int8_t* codes, int G, int d, const float* sig, float* o) {
  const int d8 = d & ~7;
  for (int i = 0; i < d8; i += 8) {
    float32x4_t a0l = vdupq_n_f32(0.0f), a0h = a0l, a1l = a0l, a1h = a0l;
    int t = 0;
    for (; t + 2 <= G; t += 2) {
      const int8_t* c = codes + static_cast<int64_t>(t) * d + i;
      float32x4_t cl, ch;
      codes8(c, &cl, &ch);
      const float32x4_t w0 = vld1q_dup_f32(p + t), w1 = vld1q_dup_f32(p + t + 1);
      a0l = vfmaq_f32(a0l, w0, cl);
      a0h = vfmaq_f32(a0h, w0, ch);
      codes8(c + d, &cl, &ch);
      a1l = vfmaq_f32(a1l, w1, cl);
      a1h = vfmaq_f32(a1h, w1, ch);
    }
    if (t < G) {
      float32x4_t cl, ch;
      codes8(codes + static_cast<int64_t>(t) * d + i, &cl, &ch);
      const float32x4_t w0 = vld1q_dup_f32(p + t);
      a0l = vfmaq_f32(a0l, w0, cl);
      a0h = vfmaq_f32(a0h, w0, ch);
    }
    vst1q_f32(o + i, vfmaq_f32(vld1q_f32(o + i), vld1q_f32(sig + i), vaddq_f32(a0l, a1l)));
    vst1q_f32(o + i + 4, vfmaq_f32(vld1q_f32(o + i + 4), vld1q_f32(sig + i + 4), vaddq_f32(a0h, a1h)));
  }
  for (int i = d8; i < d; ++i) {
    float s = 0.0f;
    for (int t = 0; t < G; ++t) s = std::fma(p[t], static_cast<float>(codes[static_cast<int64_t>(t) * d + i]), s);
    o[i] = std::fma(sig[i], s, o[i]);
  }
}

}  // namespace vlkv::ternt
