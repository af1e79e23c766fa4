#include "kv/codecs/int_codec_core.h"

#include <cmath>

#include "kv/codecs/int_kernels.h"
#include "kv/codecs/int_pack.h"
#include "kv/codecs/int_tiles.h"

namespace vlkv::intc {

void quantize_group(const float* x, int64_t stride, int n, int bits, double clip, uint8_t* codes, int64_t cstride,
                    uint16_t* scale_h, uint16_t* min_h) {
  float lo = x[0], hi = x[0];
  for (int k = 1; k < n; ++k) {
    lo = std::min(lo, x[k * stride]);
    hi = std::max(hi, x[k * stride]);
  }
  if (clip < 1.0) {
    const double c = 0.5 * (static_cast<double>(lo) + hi), h = 0.5 * (static_cast<double>(hi) - lo) * clip;
    lo = static_cast<float>(c - h);
    hi = static_cast<float>(c + h);
  }
  const int qmax = (1 << bits) - 1;
  *min_h = intq::f16_round_down(lo);
  const float mn = fp16_to_fp32(*min_h);
  *scale_h = intq::f16_round_up((hi - mn) / static_cast<float>(qmax));
  const float s = fp16_to_fp32(*scale_h);
  const float inv = s > 0.0f ? 1.0f / s : 0.0f;
  for (int k = 0; k < n; ++k) {
    const float c = std::nearbyint((x[k * stride] - mn) * inv);
    // A NaN row (a hostile KV file's window, a diverged model) codes as 0: casting NaN is undefined.
    codes[k * cstride] = c >= 0.0f ? static_cast<uint8_t>(std::min(c, static_cast<float>(qmax))) : 0;
  }
}

void pack_codes(const uint8_t* codes, int tpb, int d, int bits, bool tiles, bool key_tiles, uint8_t* dst) {
  if (!tiles) {
    for (int t = 0; t < tpb; ++t)
      intq::pack_row(codes + static_cast<size_t>(t) * d, d, bits, dst + t * intq::row_bytes(d, bits));
    return;
  }
  const int64_t tb = intt::tile_bytes(bits), units = d / intt::kTileChannels;
  for (int tt = 0; tt < tpb / intt::kTileTokens; ++tt)
    for (int u = 0; u < units; ++u)
      intt::pack_tile(codes + static_cast<size_t>(tt) * intt::kTileTokens * d, d, u * intt::kTileChannels, bits,
                      key_tiles, dst + (tt * units + u) * tb);
}

void unpack_codes(const uint8_t* src, int tpb, int d, int bits, bool tiles, bool key_tiles, uint8_t* codes) {
  if (!tiles) {
    for (int t = 0; t < tpb; ++t)
      intq::unpack_row(src + t * intq::row_bytes(d, bits), d, bits, codes + static_cast<size_t>(t) * d);
    return;
  }
  const int64_t tb = intt::tile_bytes(bits), units = d / intt::kTileChannels;
  for (int tt = 0; tt < tpb / intt::kTileTokens; ++tt)
    for (int u = 0; u < units; ++u)
      intt::unpack_tile(src + (tt * units + u) * tb, bits, key_tiles,
                        codes + static_cast<size_t>(tt) * intt::kTileTokens * d, d, u * intt::kTileChannels);
}

SegmentView Scratch::view(int n) {
  page_ptr[0] = reinterpret_cast<const uint8_t*>(rows.data());
  SegmentView v;
  v.pages = page_ptr;
  v.n_tokens = n;
  v.blocks_per_page = kTile;
  v.block_bytes = 4 * d;
  v.head_dim = d;
  return v;
}

Scratch& scratch_for(int d) {
  thread_local Scratch s;
  if (s.d != d) {
    s.d = d;
    s.rows.assign(static_cast<size_t>(kTile) * d, 0.0f);
    s.sc.assign(d, 0.0f);
    s.mn.assign(d, 0.0f);
  }
  s.block = nullptr;
  return s;
}

// The canonical spec without the rotation's "wht_" (the wrapper adds it).
static std::string canonical_name(IntCodecParams p) {
  p.wht = false;
  std::string name = int_codec_family(p);
  name += p.G ? ":G=" + std::to_string(p.G) : ":g=" + std::to_string(p.g);
  name += ",clip=" + clip_text(p.clip);
  if (p.layout != IntLayout::kRows) name += p.layout == IntLayout::kKeyTiles ? ",layout=k" : ",layout=v";
  if (p.dot_bits != intt::default_dot_bits(p.bits)) name += ",dot=" + std::to_string(p.dot_bits);
  return name;
}

IntCodecCore::IntCodecCore(const IntCodecParams& p) : p_(p) {
  if (p_.dot_bits == 0) p_.dot_bits = intt::default_dot_bits(p_.bits);
  name_ = canonical_name(p_);
}

Status IntCodecCore::check_head_dim(int d) const {
  if (std::optional<SpecError> e = validate_int_codec(p_, d)) return e->status();
  return Status::ok();
}

double IntCodecCore::base_bound() const {
  const double q = static_cast<double>((1 << p_.bits) - 1);
  return std::max(p_.clip / q, 1.0 - p_.clip) * (1.0 + 0x1p-8) + 0x1p-10;
}
double IntCodecCore::error_bound() const {
  if (!p_.wht) return base_bound();
  return base_bound() * kMaxWhtHeadDim;  // worst case over the head_dims accepted
}
double IntCodecCore::error_bound_at(int d) const {
  if (!p_.wht) return base_bound();
  return p_.G ? base_bound() * d : base_bound() * std::sqrt(static_cast<double>(group(d)) * d);
}

void IntCodecCore::encode(const float* x, int64_t x_stride, int d, uint8_t* block) const {
  const int tpb = tokens_per_block();
  std::vector<uint8_t> codes(static_cast<size_t>(tpb) * d);  // [tpb, d]
  if (p_.G) {
    for (int i = 0; i < d; ++i) {
      uint16_t s, z;
      quantize_group(x + i, x_stride, tpb, p_.bits, p_.clip, &codes[i], d, &s, &z);
      store_u16(block + scale_offset(0, i, d), s);
      store_u16(block + min_offset(0, i, d), z);
    }
  } else {
    const int g = group(d), ng = d / g;
    for (int t = 0; t < tpb; ++t)
      for (int k = 0; k < ng; ++k) {
        uint16_t s, z;
        quantize_group(x + t * x_stride + k * g, 1, g, p_.bits, p_.clip, &codes[static_cast<size_t>(t) * d + k * g], 1,
                       &s, &z);
        store_u16(block + scale_offset(t, k * g, d), s);
        store_u16(block + min_offset(t, k * g, d), z);
      }
  }
  pack_codes(codes.data(), tpb, d, p_.bits, tiled(d), key_tiles(d), block + meta_bytes(d));
}

void IntCodecCore::decode(const uint8_t* block, int d, float* x) const {
  const int tpb = tokens_per_block();
  thread_local std::vector<uint8_t> codes;  // [tpb, d]: grows once per thread, never per call
  if (codes.size() < static_cast<size_t>(tpb) * d) codes.resize(static_cast<size_t>(tpb) * d);
  unpack_codes(block + meta_bytes(d), tpb, d, p_.bits, tiled(d), key_tiles(d), codes.data());
  for (int t = 0; t < tpb; ++t)
    for (int i = 0; i < d; ++i)
      x[static_cast<size_t>(t) * d + i] =
          std::fma(static_cast<float>(codes[static_cast<size_t>(t) * d + i]),
                   fp16_to_fp32(load_u16(block + scale_offset(t, i, d))), fp16_to_fp32(load_u16(block + min_offset(t, i, d))));
}

// ---- integer dots on tiles (int_kernels.h: one variant per SIMD tier) ----
// Every tier without a kernel (scalar) takes the dequantizing path. At 8 bits the 15-bit
// queries (dot=16) keep the rounding ~64x under the codes' own error (dot=8: about equal);
// key tiles need each query step within kMaxDotChannels8 channels (exact int32 sums).
bool IntCodecCore::int_tiles(int d, bool key_op) const {
  if (!tiled(d) || key_tiles(d) != key_op || !(p_.G || group(d) % intt::kTileChannels == 0)) return false;
  if (p_.bits == 8 && key_op && (p_.G ? (p_.dot_bits == 16 ? d : 32) : group(d)) > intt::kMaxDotChannels8) return false;
  const intk::IntTileKernels& k = intk::int_tile_kernels();
  return key_op ? k.scores_for(p_.bits, p_.dot_bits) != nullptr : k.accumulate_for(p_.bits, p_.dot_bits) != nullptr;
}

bool IntCodecCore::row_scores(const float* q, int n_q, const SegmentView& seg, float scale, float* logits,
                              int64_t ld) const {
  const int d = seg.head_dim;
  if (!simd_units(d) || seg.block_bytes >= (1 << 26)) return false;
  const intk::IntRowKernels::Scores rows = intk::int_row_kernels().scores_for(p_.bits);
  if (!rows) return false;
  rows(q, n_q, seg, row_shape(d), scale, logits, ld);
  return true;
}

Codec::FusedRounding IntCodecCore::fused_rounding(int d) const {
  FusedRounding r;
  if (int_tiles(d, true)) r.query_bits = p_.dot_bits == 16 ? 15 : 8;
  if (int_tiles(d, false)) r.prob_bits = p_.dot_bits == 16 ? 14 : 7;
  return r;
}

void IntCodecCore::scores(const float* q, int n_q, const SegmentView& seg, float scale, float* logits,
                          int64_t ld) const {
  const int d = seg.head_dim;
  if (int_tiles(d, /*key_op=*/true)) {
    const intt::KeyTileShape shape{d, p_.G ? 0 : group(d), static_cast<int>(meta_bytes(d))};
    return intk::int_tile_kernels().scores_for(p_.bits, p_.dot_bits)(q, n_q, seg, shape, scale, logits, ld);
  }
  if (!tiled(d) && row_scores(q, n_q, seg, scale, logits, ld)) return;
  Scratch& s = scratch_for(d);
  for (int64_t t0 = 0; t0 < seg.n_tokens; t0 += kTile) {
    const int n = static_cast<int>(std::min<int64_t>(kTile, seg.n_tokens - t0));
    dequant(seg, t0, n, s);
    float_kernels::scores<float>(q, n_q, s.view(n), scale, logits + t0, ld);
  }
}

void IntCodecCore::accumulate(const float* p, int64_t ld, int n_q, const SegmentView& seg, float* out) const {
  const int d = seg.head_dim;
  if (int_tiles(d, /*key_op=*/false)) {
    const intt::ValueTileShape shape{d, group(d), static_cast<int>(meta_bytes(d))};
    return intk::int_tile_kernels().accumulate_for(p_.bits, p_.dot_bits)(p, ld, n_q, seg, shape, out);
  }
  Scratch& s = scratch_for(d);
  for (int64_t t0 = 0; t0 < seg.n_tokens; t0 += kTile) {
    const int n = static_cast<int>(std::min<int64_t>(kTile, seg.n_tokens - t0));
    dequant(seg, t0, n, s);
    float_kernels::accumulate<float>(p + t0, ld, n_q, s.view(n), out);
  }
}

void IntCodecCore::dequant(const SegmentView& seg, int64_t t0, int n, Scratch& s) const {
  const int d = seg.head_dim, tpb = tokens_per_block();
  if (!tiled(d)) return dequant_rows(seg, t0, n, s);
  // Tiles without an integer kernel: the whole block through the scalar reference, once per block.
  s.blk.resize(static_cast<size_t>(tpb) * d);
  for (int j = 0; j < n; ++j) {
    const int64_t t = t0 + j;
    const uint8_t* block = seg.block(t / tpb);
    if (block != s.block) {
      decode(block, d, s.blk.data());
      s.block = block;
    }
    std::memcpy(s.rows.data() + static_cast<size_t>(j) * d, s.blk.data() + (t % tpb) * d, sizeof(float) * d);
  }
}

}  // namespace vlkv::intc
