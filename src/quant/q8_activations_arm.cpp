// NEON rounding of activation blocks (q8_activations_kernels.h): fcvtas rounds half away
// from zero as std::lround does, so the codes are the scalar loop's bit for bit.
#include <arm_neon.h>

#include "base/fp16.h"
#include "quant/q8_activations_kernels.h"

namespace vlkv {
namespace {

void quantize_block_neon(const float* xb, int8_t* q, float* d, int32_t* half_sum) {
  float32x4_t v[8];
  float32x4_t amax = vdupq_n_f32(0.0f);
  for (int i = 0; i < 8; ++i) {
    v[i] = vld1q_f32(xb + 4 * i);
    amax = vmaxq_f32(amax, vabsq_f32(v[i]));
  }
  const float scale = q8_block_scale(vmaxvq_f32(amax));
  const float32x4_t id = vdupq_n_f32(scale != 0.0f ? 1.0f / scale : 0.0f);
  int32x4_t codes[8];
  for (int i = 0; i < 8; ++i) codes[i] = vcvtaq_s32_f32(vmulq_f32(v[i], id));
  const int32x4_t s0 = vaddq_s32(vaddq_s32(codes[0], codes[1]), vaddq_s32(codes[2], codes[3]));
  const int32x4_t s1 = vaddq_s32(vaddq_s32(codes[4], codes[5]), vaddq_s32(codes[6], codes[7]));
  half_sum[0] = vaddvq_s32(s0);
  half_sum[1] = vaddvq_s32(s1);
  for (int h = 0; h < 2; ++h) {  // |code| <= 127: the narrowing moves are exact
    const int16x8_t lo = vcombine_s16(vmovn_s32(codes[4 * h]), vmovn_s32(codes[4 * h + 1]));
    const int16x8_t hi = vcombine_s16(vmovn_s32(codes[4 * h + 2]), vmovn_s32(codes[4 * h + 3]));
    vst1q_s8(q + 16 * h, vcombine_s8(vmovn_s16(lo), vmovn_s16(hi)));
  }
  *d = fp16_to_fp32(fp32_to_fp16(scale));
}

}  // namespace

const QuantizeQ8BlockFn kQuantizeQ8BlockNeon = quantize_block_neon;

}  // namespace vlkv
