// The shared core of the integer codecs (int_codec.h): the quantizer, the error bound,
// naming and validation, code packing in either layout, and the dequantize-then-f32 path
// of the fused ops. Each grouping / layout is a small subclass of IntCodecCore in its own
// file; none holds ISA code (kernels: int_row_kernels.h, int_kernels.h, float_kernels.h).
//
// Quantizer (per group): lo = min, hi = max of the group's values. Clipping (clip = c in
// (0, 1]) shrinks [lo, hi] to c times its width around its centre; values outside
// saturate. The stored min is lo rounded to f16 toward -inf, the stored scale is
// (hi - min) / (2^B - 1) rounded to f16 toward +inf, so the grid covers [lo, hi]; codes
// are round((x - min) / scale) clamped to [0, 2^B - 1]; decode is fma(code, scale, min).
// Error bound per element, relative to M = max|x| over the codec block:
//   |x^ - x| <= (max(c / (2^B - 1), 1 - c) (1 + 2^-8) + 2^-10) M   (+ 2^-24 absolute)
// (rounding <= scale/2 <= (hi - lo) / (2 (2^B - 1)), hi - lo <= 2M; clipped values lie
// within (1 - c)(hi - lo)/2 of the grid edge; 2^-10 M covers the f16 rounding of min).
// Metadata is f16, so groups with |x| > 65504 are not representable (saturated).
//
// Rotated codecs (p.wht, wrapped by wht_codec.h): the bound above holds in the rotated
// basis; back in x it is at most eb sqrt(g d) M per element (per token, Cauchy-Schwarz
// over groups) or eb d M (per channel) - loose worst cases; rotation usually *lowers* the
// error on outlier channels. The core states that bound; the wrapper does the rotation.
//
// Code layouts (the quantizer and decode() values are the same in every layout):
//  - rows: a token's codes densely packed (int_pack.h);
//  - tiles (int_tiles.h): blocks of 16 tokens in key or value tiles, integer dots on the
//    codes in place at every SIMD tier but scalar (int_kernels.h; queries rounded to 15
//    bits and probabilities to 14, or 8 / 7 with dot=8).
// Where no integer kernel applies, 16 tokens are dequantized into an L1 scratch row block
// (never the cache) and the f32 kernels run over it (float_kernels.h). Dequantized values
// are identical at every tier (same fma).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kv/codec.h"
#include "kv/codecs/float_kernels.h"
#include "kv/codecs/int_row_kernels.h"
#include "kv/codecs/int_codec.h"
#include "kv/codecs/wht_codec.h"

namespace vlkv::intc {

constexpr int kTile = 16;  // tokens dequantized per fused-op tile

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}
inline void store_u16(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }

// Quantizes n values x[k * stride] (k < n) into codes[k * cstride]; returns f16 scale, min.
void quantize_group(const float* x, int64_t stride, int n, int bits, double clip, uint8_t* codes, int64_t cstride,
                    uint16_t* scale_h, uint16_t* min_h);

// codes [tpb, d] <-> a block's code area, in rows or in 16x16 tiles (keys or values).
void pack_codes(const uint8_t* codes, int tpb, int d, int bits, bool tiles, bool key_tiles, uint8_t* dst);
void unpack_codes(const uint8_t* src, int tpb, int d, int bits, bool tiles, bool key_tiles, uint8_t* codes);

// Thread-local scratch of the dequantizing path: one tile of rows and a block's metadata.
struct Scratch {
  std::vector<float> rows;    // [kTile, d]
  std::vector<float> sc, mn;  // [d] per-channel scale / min of block `block`
  std::vector<float> blk;     // tiled layouts: block `block` decoded, [tpb, d]
  const uint8_t* block = nullptr;
  const uint8_t* page_ptr[1] = {nullptr};
  int d = 0;
  // The first n rows as an f32 segment for float_kernels.
  SegmentView view(int n);
};
Scratch& scratch_for(int d);

class IntCodecCore : public Codec {
 public:
  explicit IntCodecCore(const IntCodecParams& p);

  const std::string& name() const override { return name_; }
  Status check_head_dim(int d) const override;
  // Quantizes groups of channels (per token) or of tokens (per channel), then packs the codes.
  void encode(const float* x, int64_t x_stride, int d, uint8_t* block) const override;
  // The scalar reference, in the stored (for wht codecs: rotated) basis.
  void decode(const uint8_t* block, int d, float* x) const override;
  double error_bound() const override;
  double error_bound_at(int d) const override;

  void scores(const float* q, int n_q, const SegmentView& seg, float scale, float* logits,
              int64_t ld) const override;
  void accumulate(const float* p, int64_t ld, int n_q, const SegmentView& seg, float* out) const override;
  // Tiled layouts with an integer kernel: 15/8-bit signed queries (key tiles), 14/7-bit probabilities (value tiles).
  FusedRounding fused_rounding(int d) const override;

 protected:
  int group(int d) const { return p_.g == 0 ? d : p_.g; }
  int dot_bits() const { return p_.dot_bits; }
  // Every 16-code unit of a row lies in one group: the SIMD rows kernels apply.
  bool simd_units(int d) const { return d % 16 == 0 && (p_.G || group(d) % 16 == 0); }

  // ---- what each grouping / layout says ----
  virtual bool tiled(int d) const = 0;
  virtual bool key_tiles(int d) const = 0;
  virtual int64_t meta_bytes(int d) const = 0;
  // f16 scale and min of channel i of token t within a block.
  virtual int64_t scale_offset(int t, int i, int d) const = 0;
  virtual int64_t min_offset(int t, int i, int d) const = 0;
  // Rows layouts: the block shape the rows scores kernels read (int_row_kernels.h).
  virtual intk::IntRowShape row_shape(int d) const = 0;
  // Rows layouts: tokens [t0, t0 + n) of the view -> s.rows [n, d] through the row kernels.
  virtual void dequant_rows(const SegmentView& seg, int64_t t0, int n, Scratch& s) const = 0;

  IntCodecParams p_;

 private:
  bool int_tiles(int d, bool key_op) const;
  // Rows layouts: scores on the codes in place where the tier has a rows kernel (else false).
  bool row_scores(const float* q, int n_q, const SegmentView& seg, float scale, float* logits, int64_t ld) const;
  double base_bound() const;
  // Tokens [t0, t0 + n) of the view -> s.rows [n, d].
  void dequant(const SegmentView& seg, int64_t t0, int n, Scratch& s) const;

  std::string name_;
};

}  // namespace vlkv::intc
