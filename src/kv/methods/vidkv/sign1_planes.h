// Bit-plane kernels shared by the 1-bit / 2-bit per-channel codecs (sign1c, mixk).
// A plane is the G bits of one channel (or spectrum coefficient) over the G tokens
// of a block: [G/8] bytes, bit t of plane j = (planes[j * G/8 + t/8] >> (t % 8)) & 1.
// Scores and accumulate over such codes reduce to two weighted plane sums:
//   plane_scores_rows: lg[r, t] = base[r] + sum_j w[r, j] * bit_j(t) (weights per plane and row)
//   plane_sums:   u[j]    = sum_t p[t] * bit_j(t)       (one weight per token)
// Scalar reference here; AVX2 (byte -> 8 lanes by table) and AVX-512 (mask registers,
// test-into-mask) kernels in sign1_planes_{avx2,avx512}.cpp, dispatched through
// sign1_kernels.h. Internal to codecs/.
#pragma once

#include <cstdint>
#include <cstring>

#include "base/fp16.h"
#include "kv/methods/vidkv/sign1_kernels.h"

namespace vlkv::sign1 {

// Block fields are byte-packed (no alignment): read and write halves through memcpy.
inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}
inline void store_f16(uint8_t* p, float x) {
  const float lim = 65504.0f;  // clamp instead of overflowing to inf
  const uint16_t h = fp32_to_fp16(x > lim ? lim : x < -lim ? -lim : x);
  std::memcpy(p, &h, 2);
}
// The value a stored half reads back as.
inline float round_f16(float x) {
  uint8_t b[2];
  store_f16(b, x);
  return load_f16(b);
}

// out[0, n) = the n byte-packed halves at p (exact at every tier).
inline void load_f16_row_scalar(const uint8_t* p, int n, float* out) {
  for (int i = 0; i < n; ++i) out[i] = load_f16(p + 2 * i);
}
inline void load_f16_row(const uint8_t* p, int n, float* out) { sign1_kernels().load_f16_row(p, n, out); }

inline bool plane_bit(const uint8_t* planes, int group, int j, int t) {
  return (planes[static_cast<int64_t>(j) * (group / 8) + t / 8] >> (t % 8)) & 1;
}

// ---------------- scalar reference ----------------
// lg[r * ld + t] = scale * (base[r] + sum_j w[r * n_planes + j] * bit_j(t)), r < n_rows.
inline void plane_scores_rows_scalar(const uint8_t* planes, int n_planes, int group, const float* w,
                                     const float* base, int n_rows, float scale, float* lg, int64_t ld) {
  for (int r = 0; r < n_rows; ++r)
    for (int t = 0; t < group; ++t) {
      float s = base[r];
      for (int j = 0; j < n_planes; ++j)
        if (plane_bit(planes, group, j, t)) s += w[static_cast<int64_t>(r) * n_planes + j];
      lg[r * ld + t] = s * scale;
    }
}

inline void plane_sums_scalar(const uint8_t* planes, int n_planes, int group, const float* p, float* u) {
  for (int j = 0; j < n_planes; ++j) {
    float s = 0.0f;
    for (int t = 0; t < group; ++t)
      if (plane_bit(planes, group, j, t)) s += p[t];
    u[j] = s;
  }
}

// Bits [t0, t0 + 32) of plane j as a word (fewer bytes at the end of the group).
inline uint32_t plane_word(const uint8_t* planes, int group, int j, int t0) {
  const int stride = group / 8, nb = stride - t0 / 8 < 4 ? stride - t0 / 8 : 4;
  const uint8_t* src = planes + static_cast<int64_t>(j) * stride + t0 / 8;
  uint32_t w = 0;
  if (nb == 4) {
    std::memcpy(&w, src, 4);  // fixed size: one load, no library call
  } else {
    for (int i = 0; i < nb; ++i) w |= static_cast<uint32_t>(src[i]) << (8 * i);
  }
  return w;
}

// Runs f.template operator()<RB>(r0) over n_rows in blocks of RB <= 4 rows (the SIMD
// kernels keep RB rows' accumulators in registers).
template <class F>
inline void for_row_blocks(int n_rows, F&& f) {
  for (int r0 = 0; r0 < n_rows; r0 += 4) {
    switch (n_rows - r0 < 4 ? n_rows - r0 : 4) {
      case 4: f.template operator()<4>(r0); break;
      case 3: f.template operator()<3>(r0); break;
      case 2: f.template operator()<2>(r0); break;
      default: f.template operator()<1>(r0);
    }
  }
}

// byte_floats().f[b][i] = 1.0f iff bit i of b is set, else 0, for the AVX2 and NEON plane
// kernels: each plane's byte of an 8-token slab expands to 8 lanes, and acc += table[b] * w is
// one FMA (an and + add with a mask table would be two).
struct ByteFloatTable {
  alignas(32) float f[256][8];
  ByteFloatTable() {
    for (int b = 0; b < 256; ++b)
      for (int i = 0; i < 8; ++i) f[b][i] = ((b >> i) & 1) ? 1.0f : 0.0f;
  }
};
inline const ByteFloatTable& byte_floats() {
  static const ByteFloatTable t;
  return t;
}

// ---------------- the ISA kernels (sign1_planes_{avx2,avx512,arm}.cpp) ----------------
void plane_scores_rows_avx2(const uint8_t* planes, int n_planes, int group, const float* w, const float* base,
                            int n_rows, float scale, float* lg, int64_t ld);
void plane_scores_rows_avx512(const uint8_t* planes, int n_planes, int group, const float* w, const float* base,
                              int n_rows, float scale, float* lg, int64_t ld);
// mixk: planes = n_out low, n_out high, n_sign sign planes, w[r, n_out + j] = 2 w[r, j].
void mixk_plane_scores_rows_avx2(const uint8_t* planes, int n_out, int n_sign, int group, const float* w,
                                 const float* base, int n_rows, float scale, float* lg, int64_t ld);
void mixk_plane_scores_rows_avx512(const uint8_t* planes, int n_out, int n_sign, int group, const float* w,
                                   const float* base, int n_rows, float scale, float* lg, int64_t ld);
void plane_sums_avx2(const uint8_t* planes, int n_planes, int group, const float* p, float* u);
void plane_sums_avx512(const uint8_t* planes, int n_planes, int group, const float* p, float* u);
void load_f16_row_f16c(const uint8_t* p, int n, float* out);
// ARM64 (sign1_planes_arm.cpp): the AVX2 kernels' operations in their order (the same bits).
void plane_scores_rows_neon(const uint8_t* planes, int n_planes, int group, const float* w, const float* base,
                            int n_rows, float scale, float* lg, int64_t ld);
void mixk_plane_scores_rows_neon(const uint8_t* planes, int n_out, int n_sign, int group, const float* w,
                                 const float* base, int n_rows, float scale, float* lg, int64_t ld);
void plane_sums_neon(const uint8_t* planes, int n_planes, int group, const float* p, float* u);
void load_f16_row_neon(const uint8_t* p, int n, float* out);

// ---------------- dispatch (sign1_kernels.h) ----------------
// lg[r * ld + t] = scale * (base[r] + sum_j w[r * n_planes + j] * bit_j(t)), r < n_rows.
//   w: [n_rows, n_planes], base: [n_rows], lg: rows of stride ld, G tokens each.
inline void plane_scores_rows(const uint8_t* planes, int n_planes, int group, const float* w, const float* base,
                              int n_rows, float scale, float* lg, int64_t ld) {
  sign1_kernels().plane_scores_rows(planes, n_planes, group, w, base, n_rows, scale, lg, ld);
}

// u[j] = sum_t p[t] * bit_j(t).  p: [G], u: [n_planes]
inline void plane_sums(const uint8_t* planes, int n_planes, int group, const float* p, float* u) {
  sign1_kernels().plane_sums(planes, n_planes, group, p, u);
}

}  // namespace vlkv::sign1
