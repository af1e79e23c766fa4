// Dense packing of b-bit codes (b = 2, 3, 4, 8) for the integer KV codecs, the
// f16 metadata rounding they need, and the SIMD unpack of 16 codes. Internal to codecs/.
//
// Row layout: a row of d codes (d % 8 == 0) is split into units of 16 codes, the last
// unit holding 8 when d % 16 == 8; a unit of n codes takes n*b/8 bytes, units back to
// back (so a row is exactly d*b/8 bytes). Inside a unit of n codes:
//   b=8: byte e = code e.
//   b=4: byte j < n/2 holds code j in bits 0-3 and code j + n/2 in bits 4-7.
//   b=2: byte j < n/4 holds code j + m*n/4 in bits 2m..2m+1 (m = 0..3).
//   b=3: n/4 bytes of the low two bits laid out as b=2, then n/8 bytes of the high
//        bit: bit e%8 of byte e/8 is bit 2 of code e (8 codes in 3 bytes).
// Each layout turns one 16-code unit into 16 bytes in code order with 3-6 SSE/AVX2 ops
// (int_unpack_x86.h).
#pragma once

#include <cstdint>
#include <cstring>

#include "base/fp16.h"

namespace vlkv::intq {

inline int64_t row_bytes(int d, int bits) { return static_cast<int64_t>(d) * bits / 8; }

// codes: [d] values < 2^bits -> out: [row_bytes(d, bits)]
inline void pack_row(const uint8_t* codes, int d, int bits, uint8_t* out) {
  for (int u0 = 0; u0 < d; u0 += 16) {
    const int n = d - u0 >= 16 ? 16 : d - u0;
    const uint8_t* c = codes + u0;
    uint8_t* o = out + static_cast<int64_t>(u0) * bits / 8;
    switch (bits) {
      case 8: std::memcpy(o, c, n); break;
      case 4:
        for (int j = 0; j < n / 2; ++j) o[j] = static_cast<uint8_t>(c[j] | (c[j + n / 2] << 4));
        break;
      case 2:
      case 3: {
        const int q = n / 4;
        for (int j = 0; j < q; ++j)
          o[j] = static_cast<uint8_t>((c[j] & 3) | ((c[j + q] & 3) << 2) | ((c[j + 2 * q] & 3) << 4) |
                                      ((c[j + 3 * q] & 3) << 6));
        if (bits == 3) {
          for (int j = 0; j < n / 8; ++j) {
            uint8_t h = 0;
            for (int e = 0; e < 8; ++e) h |= static_cast<uint8_t>(((c[8 * j + e] >> 2) & 1) << e);
            o[q + j] = h;
          }
        }
        break;
      }
    }
  }
}

// in: [row_bytes(d, bits)] -> codes: [d]
inline void unpack_row(const uint8_t* in, int d, int bits, uint8_t* codes) {
  for (int u0 = 0; u0 < d; u0 += 16) {
    const int n = d - u0 >= 16 ? 16 : d - u0;
    const uint8_t* p = in + static_cast<int64_t>(u0) * bits / 8;
    uint8_t* c = codes + u0;
    switch (bits) {
      case 8: std::memcpy(c, p, n); break;
      case 4:
        for (int j = 0; j < n / 2; ++j) {
          c[j] = p[j] & 15;
          c[j + n / 2] = p[j] >> 4;
        }
        break;
      case 2:
      case 3: {
        const int q = n / 4;
        for (int j = 0; j < q; ++j)
          for (int m = 0; m < 4; ++m) c[j + m * q] = (p[j] >> (2 * m)) & 3;
        if (bits == 3)
          for (int e = 0; e < n; ++e) c[e] |= static_cast<uint8_t>(((p[q + e / 8] >> (e % 8)) & 1) << 2);
        break;
      }
    }
  }
}

// IEEE half of x rounded toward -inf / +inf (so a stored min never exceeds the data's
// minimum and a stored scale never shrinks the range). |x| is clamped to 65504 first.
inline uint16_t f16_round_down(float x) {
  x = x > 65504.0f ? 65504.0f : (x < -65504.0f ? -65504.0f : x);
  uint16_t h = fp32_to_fp16(x);
  if (fp16_to_fp32(h) > x) h = (h & 0x7fff) == 0 ? uint16_t{0x8001} : (h & 0x8000 ? h + 1 : h - 1);
  return h;
}
inline uint16_t f16_round_up(float x) {
  x = x > 65504.0f ? 65504.0f : (x < -65504.0f ? -65504.0f : x);
  uint16_t h = fp32_to_fp16(x);
  if (fp16_to_fp32(h) < x) h = (h & 0x7fff) == 0 ? uint16_t{0x0001} : (h & 0x8000 ? h - 1 : h + 1);
  return h;
}

}  // namespace vlkv::intq
