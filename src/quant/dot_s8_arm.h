// The 8-bit integer dot of the ARM64 kernels (KV codecs, the Q8_0 GEMM), as policy types
// over 4 int32 lanes: lane l += the dot of its 4 bytes in `codes` with quad j (bytes
// 4j..4j+3) of `q16`, the form of x86's vpdpbusd with a broadcast quad. Both operands are s8
// (sdot and smull are signed x signed; callers offset u8 values, e.g. c - 128, and add the
// offset's sum back).
//   NeonDot:    smull (s8 x s8 -> s16) + sadalp (pairs into s32), one addp at the end (ARMv8.0);
//   DotprodDot: sdot by element (vdotq_laneq_s32, ARMv8.2 dotprod): only instantiate it
//               inside a VLKV_TARGET_BEGIN(VLKV_ISA_DOTPROD) region (*_dotprod.cpp files).
// Unnamed namespace: each including file keeps its own copy (base/simd_dispatch.h).
#pragma once

#include <arm_neon.h>

namespace vlkv::dots8 {
namespace {

struct NeonDot {
  struct Acc {
    int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
  };
  template <int j>
  static void add(Acc& a, int8x16_t codes, int8x16_t q16) {
    const int8x16_t qb = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(q16), j));
    a.lo = vpadalq_s16(a.lo, vmull_s8(vget_low_s8(codes), vget_low_s8(qb)));
    a.hi = vpadalq_s16(a.hi, vmull_high_s8(codes, qb));
  }
  static int32x4_t total(const Acc& a) { return vpaddq_s32(a.lo, a.hi); }
};

struct DotprodDot {
  struct Acc {
    int32x4_t a = vdupq_n_s32(0);
  };
  template <int j>
  static void add(Acc& acc, int8x16_t codes, int8x16_t q16) {
    acc.a = vdotq_laneq_s32(acc.a, codes, q16, j);
  }
  static int32x4_t total(const Acc& acc) { return acc.a; }
};

// acc += the dots of quads[j] with quad j of q16, j < 4.
template <class Dot>
inline void dot4(typename Dot::Acc& a, const int8x16_t* quads, int8x16_t q16) {
  Dot::template add<0>(a, quads[0], q16);
  Dot::template add<1>(a, quads[1], q16);
  Dot::template add<2>(a, quads[2], q16);
  Dot::template add<3>(a, quads[3], q16);
}

}  // namespace
}  // namespace vlkv::dots8
