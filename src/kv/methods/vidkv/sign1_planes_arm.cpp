// NEON kernels of the shared bit-plane ops (sign1_planes.h), ported from the AVX2 ones with
// the same float operations in the same order (8 tokens per slab as two 4-lane halves, each
// plane's byte expanded through the same 256-entry table; plane sums with the same masked
// adds and the same two chains), so the results are the AVX2 tier's bits.
#include <arm_neon.h>

#include "kv/methods/vidkv/sign1_planes.h"

namespace vlkv::sign1 {
namespace {

// 8 lanes as two halves.
struct F8 {
  float32x4_t lo, hi;
};
inline F8 row8(const float* p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }
inline F8 fma8(F8 a, F8 b, float32x4_t c) { return {vfmaq_f32(a.lo, b.lo, c), vfmaq_f32(a.hi, b.hi, c)}; }

// AVX2's mixk_rows_16: RB query rows x 2 slabs (16 tokens); `two`: the second slab is there.
template <int RB>
void mixk_rows_16(const uint8_t* pb, int n_out, int n_sign, int stride, bool two, const float* w, const float* base,
                  float scale, float* lg, int64_t ld) {
  const auto& lut = byte_floats().f;
  const int n_planes = 2 * n_out + n_sign;
  const float32x4_t zero = vdupq_n_f32(0.0f), two_f = vdupq_n_f32(2.0f);
  F8 a[RB], b[RB];
  for (int r = 0; r < RB; ++r) a[r] = b[r] = {vdupq_n_f32(base[r]), vdupq_n_f32(base[r])};
  for (int j = 0; j < n_out; ++j) {
    const uint8_t* lo = pb + static_cast<int64_t>(j) * stride;
    const uint8_t* hi = pb + static_cast<int64_t>(n_out + j) * stride;
    const F8 c0 = fma8(row8(lut[lo[0]]), row8(lut[hi[0]]), two_f);
    const F8 c1 = two ? fma8(row8(lut[lo[1]]), row8(lut[hi[1]]), two_f) : F8{zero, zero};
    for (int r = 0; r < RB; ++r) {
      const float32x4_t wr = vld1q_dup_f32(w + static_cast<int64_t>(r) * n_planes + j);
      a[r] = fma8(a[r], c0, wr);
      b[r] = fma8(b[r], c1, wr);
    }
  }
  for (int k = 0; k < n_sign; ++k) {
    const uint8_t* p = pb + static_cast<int64_t>(2 * n_out + k) * stride;
    const F8 m0 = row8(lut[p[0]]);
    const F8 m1 = two ? row8(lut[p[1]]) : F8{zero, zero};
    for (int r = 0; r < RB; ++r) {
      const float32x4_t wr = vld1q_dup_f32(w + static_cast<int64_t>(r) * n_planes + 2 * n_out + k);
      a[r] = fma8(a[r], m0, wr);
      b[r] = fma8(b[r], m1, wr);
    }
  }
  const float32x4_t sc = vdupq_n_f32(scale);
  for (int r = 0; r < RB; ++r) {
    vst1q_f32(lg + r * ld, vmulq_f32(a[r].lo, sc));
    vst1q_f32(lg + r * ld + 4, vmulq_f32(a[r].hi, sc));
    if (two) {
      vst1q_f32(lg + r * ld + 8, vmulq_f32(b[r].lo, sc));
      vst1q_f32(lg + r * ld + 12, vmulq_f32(b[r].hi, sc));
    }
  }
}

}  // namespace

void mixk_plane_scores_rows_neon(const uint8_t* planes, int n_out, int n_sign, int group, const float* w,
                                 const float* base, int n_rows, float scale, float* lg, int64_t ld) {
  const int n_planes = 2 * n_out + n_sign, stride = group / 8;
  for_row_blocks(n_rows, [&]<int RB>(int r0) {
    for (int t0 = 0; t0 < group; t0 += 16)
      mixk_rows_16<RB>(planes + t0 / 8, n_out, n_sign, stride, group - t0 >= 16, w + static_cast<int64_t>(r0) * n_planes,
                       base + r0, scale, lg + r0 * ld + t0, ld);
  });
}

void plane_scores_rows_neon(const uint8_t* planes, int n_planes, int group, const float* w, const float* base,
                            int n_rows, float scale, float* lg, int64_t ld) {
  mixk_plane_scores_rows_neon(planes, 0, n_planes, group, w, base, n_rows, scale, lg, ld);
}

// AVX2's plane_sums: 8 planes' words per pass, even and odd tokens in two chains of masked adds.
void plane_sums_neon(const uint8_t* planes, int n_planes, int group, const float* p, float* u) {
  uint32_t words[8];
  float res[8];
  for (int j0 = 0; j0 < n_planes; j0 += 8) {
    const int nj = n_planes - j0 < 8 ? n_planes - j0 : 8;
    float32x4_t u0l = vdupq_n_f32(0.0f), u0h = u0l, u1l = u0l, u1h = u0l;
    for (int t0 = 0; t0 < group; t0 += 32) {
      for (int i = 0; i < 8; ++i) words[i] = i < nj ? plane_word(planes, group, j0 + i, t0) : 0u;
      const uint32x4_t wl = vld1q_u32(words), wh = vld1q_u32(words + 4);
      const int nt = group - t0 < 32 ? group - t0 : 32;
      auto masked = [&](uint32x4_t wv, int t) {  // p[t] where bit t is set, else +0
        return vreinterpretq_f32_u32(vandq_u32(vtstq_u32(wv, vdupq_n_u32(1u << t)),
                                               vreinterpretq_u32_f32(vld1q_dup_f32(p + t0 + t))));
      };
      int t = 0;
      for (; t + 2 <= nt; t += 2) {
        u0l = vaddq_f32(u0l, masked(wl, t));
        u0h = vaddq_f32(u0h, masked(wh, t));
        u1l = vaddq_f32(u1l, masked(wl, t + 1));
        u1h = vaddq_f32(u1h, masked(wh, t + 1));
      }
      for (; t < nt; ++t) {
        u0l = vaddq_f32(u0l, masked(wl, t));
        u0h = vaddq_f32(u0h, masked(wh, t));
      }
    }
    vst1q_f32(res, vaddq_f32(u0l, u1l));
    vst1q_f32(res + 4, vaddq_f32(u0h, u1h));
    for (int i = 0; i < nj; ++i) u[j0 + i] = res[i];
  }
}

void load_f16_row_neon(const uint8_t* p, int n, float* out) {
  int i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(out + i, vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p + 2 * i))));
  for (; i < n; ++i) out[i] = load_f16(p + 2 * i);
}

}  // namespace vlkv::sign1
