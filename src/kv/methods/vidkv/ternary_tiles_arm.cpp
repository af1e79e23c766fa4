// NEON kernels of the ternary codec's tiled blocks (ternary_tiles.h): decode by byte compares
// (ternary_tiles_x86.h's decode32 on 16 bytes: the same integer codes), scores with the f32
// operations of tile_scores_avx2 in its order (the same bits), and the plain NEON accumulate
// (ternary_tiles_arm.h: smull + sadalp dots, the x86 kernels' exact sums and bits).
#include "kv/methods/vidkv/ternary_tiles_arm.h"

namespace vlkv::ternt {
namespace {

// The 5 codes of 16 bytes: digit g of b[i] - 1, written to out + 64 * g.
inline void decode16(uint8x16_t b, int8_t* out) {
  int8x16_t x = vreinterpretq_s8_u8(veorq_u8(b, vdupq_n_u8(0x80)));  // b - 128 as s8 (b < 243)
  int w = 81;
  for (int g = 4; g >= 1; --g, w /= 3) {
    const int8x16_t c1 = vreinterpretq_s8_u8(vcgtq_s8(x, vdupq_n_s8(static_cast<int8_t>(w - 1 - 128))));  // -1 iff b >= w
    const int8x16_t c2 = vreinterpretq_s8_u8(vcgtq_s8(x, vdupq_n_s8(static_cast<int8_t>(2 * w - 1 - 128))));
    vst1q_s8(out + 64 * g, vmvnq_s8(vaddq_s8(c1, c2)));  // digit - 1 = ~(c1 + c2)
    const int8x16_t wv = vdupq_n_s8(static_cast<int8_t>(w));
    x = vsubq_s8(vsubq_s8(x, vandq_s8(c1, wv)), vandq_s8(c2, wv));
  }
  vst1q_s8(out, vaddq_s8(x, vdupq_n_s8(127)));  // b0 - 1
}

inline float32x4_t codes4(const int8_t* c) {  // 4 int8 codes as floats
  int32_t w;
  std::memcpy(&w, c, 4);
  return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(w))))));
}

}  // namespace

void decode_tiles_neon(const uint8_t* trits, const TritOrder& o, int8_t* codes) {
  for (int ch = 0; ch < o.n_full; ++ch)
    for (int i = 0; i < 64; i += 16) decode16(vld1q_u8(trits + 64 * ch + i), codes + 320 * ch + i);
  decode_tail(trits, o, codes);
}

// tile_scores_avx2's sums: per quad j, 8 lanes {channel 2m x 4 tokens, channel 2m + 1 x 4
// tokens} in two chains (even / odd m), added per unit; the two channel slots added at the end.
void tile_scores_neon(const float* qs, const int8_t* codes, const TritOrder& o, float scale, float* lr) {
  const int nj = o.G / 4, nu = o.d / 16;
  float32x4_t acc[64][2];  // [quad][slot], nj <= 64
  for (int j = 0; j < nj; ++j) acc[j][0] = acc[j][1] = vdupq_n_f32(0.0f);
  for (int u = 0; u < nu; ++u)
    for (int j = 0; j < nj; ++j) {
      const int8_t* c = codes + 64 * (static_cast<int64_t>(u) * nj + j);
      float32x4_t a0[2] = {acc[j][0], acc[j][1]}, a1[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
      for (int m = 0; m < 8; m += 2) {
        const float* q = qs + 16 * u + 2 * m;
        a0[0] = vfmaq_f32(a0[0], vdupq_n_f32(q[0]), codes4(c + 8 * m));
        a0[1] = vfmaq_f32(a0[1], vdupq_n_f32(q[1]), codes4(c + 8 * m + 4));
        a1[0] = vfmaq_f32(a1[0], vdupq_n_f32(q[2]), codes4(c + 8 * m + 8));
        a1[1] = vfmaq_f32(a1[1], vdupq_n_f32(q[3]), codes4(c + 8 * m + 12));
      }
      acc[j][0] = vaddq_f32(a0[0], a1[0]);
      acc[j][1] = vaddq_f32(a0[1], a1[1]);
    }
  const float32x4_t sc = vdupq_n_f32(scale);
  for (int j = 0; j < nj; ++j) vst1q_f32(lr + 4 * j, vmulq_f32(vaddq_f32(acc[j][0], acc[j][1]), sc));
}

bool accum_tiles_neon(const float* p, const int8_t* codes, const TritOrder& o, const float* sig, float* out) {
  return accum_tiles_arm<dots8::NeonDot>(p, codes, o, sig, out);
}

}  // namespace vlkv::ternt
