// Uniform asymmetric b-bit integer codecs (b = 8, 4, 3, 2) with f16 scale and f16 min
// per group, in two granularities, each optionally Walsh-Hadamard rotated:
//
//   spec                 block (tokens)  group                      bits/elem (d = head_dim)
//   intB:g=32,clip=1     1 token         g channels of the token    B + 32/g
//   intBc:G=32,clip=1    G tokens        one channel over G tokens  B + 32/G   (KIVI keys)
//   wht_intB / wht_intBc same, of the rows rotated by the normalized WHT over head_dim
//
// B in {8, 4, 3, 2}; g = 0 means g = head_dim; g must divide head_dim (else a clear
// InvalidArgument); head_dim must be a multiple of 8 (dense packing, int_pack.h) and,
// for wht_*, a power of two <= 256. At head_dim 128: int8 g32 9.0, int4 g32 5.0,
// g64 4.5, g128 4.25, int3 g32 4.0, int2 g32 3.0; int2c G32 3.0, int4c G32 5.0.
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
// Rotated variants store y = x H (H the normalized WHT: orthonormal, self-inverse) and
// decode() returns x^ = y^ H; scores() expects q H (Codec::transform_query) and
// accumulate() adds p y^ (attention applies H once to that accumulator at the end). In
// the rotated basis the bound above holds for y; back in x it is at most
// eb sqrt(g d) M per element (per token, Cauchy-Schwarz over groups) or eb d M (per
// channel) - loose worst cases; rotation usually *lowers* the error on outlier channels.
//
// Code layouts (the quantizer and decode() values are the same in every layout):
//  - rows (per-token default, tpb 1): a token's codes densely packed (int_pack.h);
//  - tiles (int_tiles.h): per-token codecs with layout=k (keys) or layout=v (values) store
//    blocks of 16 tokens; per-channel codecs use key tiles whenever G % 16 == 0, B is 2, 4
//    or 8 and head_dim % 16 == 0 (else rows). Block = [scales][mins][codes], per-token
//    tiled metadata group-major ([n_groups][16 tokens] f16) so 16 tokens' scales load at once.
//
// Fused ops: at every SIMD tier but scalar, tiled 2/4/8-bit layouts run integer dots on the
// codes in place (int_kernels.h: one table, AVX2 / AVX-VNNI / AVX-512 VNNI variants, the same
// rounding - queries to 15 bits and probabilities to 14, or 8 / 7 with dot=8 - and the same
// results); rows layouts of 2/4-bit codes use 24-bit query dots with gathers where the tier
// has them (int_row_kernels.h: AVX-512 VNNI). Otherwise (rows) 16 tokens are dequantized
// from the codes in place (int_row_kernels.h, one table) into an L1 scratch row block (never
// the cache) and the f32 kernels run over it (float_kernels.h); tiled layouts without an
// integer kernel at the tier (scalar), and 8-bit key tiles whose query step would span more
// than intt::kMaxDotChannels8 channels (head_dim > 512), decode tiles with the reference.
// Dequantized values are identical at every tier (same fma). No ISA code in this file.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kv/codec_registry.h"
#include "kv/codecs/float_kernels.h"
#include "kv/codecs/int_pack.h"
#include "kv/codecs/int_kernels.h"
#include "kv/codecs/int_row_kernels.h"
#include "kv/codecs/int_tiles.h"
#include "kv/codecs/wht.h"

namespace vlkv {
namespace {

constexpr int kTile = 16;       // tokens dequantized per fused-op tile
constexpr int kMaxWhtDim = 256;  // largest head_dim a rotated codec accepts (error bound)

// Per-token code layout (per-channel codecs choose theirs from G, bits and head_dim).
enum class TokenLayout { kRows, kKeyTiles, kValueTiles };

struct IntParams {
  int bits = 4;
  int g = 32;       // per-token: channels per group (0 = head_dim); unused per channel
  int G = 0;        // per-channel: tokens per block; 0 = per-token codec
  double clip = 1.0;
  bool wht = false;
  TokenLayout layout = TokenLayout::kRows;  // per-token only
  int dot_bits = 16;  // tiled integer ops: dot=16 rounds queries / probabilities to 15 / 14 bits, dot=8 to 8 / 7
};

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}
inline void store_u16(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }

// Quantizes n values x[k * stride] (k < n) into codes[k * cstride]; returns f16 scale, min.
void quantize_group(const float* x, int64_t stride, int n, int bits, double clip, uint8_t* codes,
                    int64_t cstride, uint16_t* scale_h, uint16_t* min_h) {
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

class IntCodec final : public Codec {
 public:
  explicit IntCodec(const IntParams& p) : p_(p) {
    name_ = std::string(p.wht ? "wht_" : "") + "int" + std::to_string(p.bits) + (p.G ? "c" : "");
    char clip[32];
    std::snprintf(clip, sizeof clip, "%g", p.clip);
    name_ += p.G ? ":G=" + std::to_string(p.G) : ":g=" + std::to_string(p.g);
    name_ += std::string(",clip=") + clip;
    if (p.layout != TokenLayout::kRows) name_ += p.layout == TokenLayout::kKeyTiles ? ",layout=k" : ",layout=v";
    if (p.dot_bits != intt::default_dot_bits(p.bits)) name_ += ",dot=" + std::to_string(p.dot_bits);
  }

  const std::string& name() const override { return name_; }

  Status check_head_dim(int d) const override {
    const std::string who = name_.substr(0, name_.find(':'));
    if (d <= 0 || d % 8 != 0)
      return invalid_argument(who + ": head_dim " + std::to_string(d) + " is not a positive multiple of 8");
    if (!p_.G && p_.g != 0 && d % p_.g != 0)
      return invalid_argument(who + ": group size " + std::to_string(p_.g) + " does not divide head_dim " +
                              std::to_string(d) + " (choose g among the divisors of head_dim, or g=0 for the whole head)");
    if (p_.layout != TokenLayout::kRows && d % intt::kTileChannels != 0)
      return invalid_argument(who + ": layout=k|v needs head_dim a multiple of 16, got " + std::to_string(d) +
                              " (use the default rows layout)");
    if (p_.wht && (!is_power_of_two(d) || d > kMaxWhtDim))
      return invalid_argument(who + ": the Walsh-Hadamard rotation needs head_dim a power of two <= " +
                              std::to_string(kMaxWhtDim) + ", got " + std::to_string(d));
    if (d > 1024) return invalid_argument(who + ": head_dim " + std::to_string(d) + " > 1024");
    return Status::ok();
  }

  int tokens_per_block() const override {
    if (p_.G) return p_.G;
    return p_.layout == TokenLayout::kRows ? 1 : intt::kTileTokens;
  }
  int64_t block_bytes(int d) const override {
    if (p_.G) return 4LL * d + p_.G * intq::row_bytes(d, p_.bits);
    return tokens_per_block() * (4LL * (d / group(d)) + intq::row_bytes(d, p_.bits));
  }
  double error_bound() const override {
    if (!p_.wht) return base_bound();
    return base_bound() * kMaxWhtDim;  // worst case over the head_dims accepted
  }
  double error_bound_at(int d) const override {
    if (!p_.wht) return base_bound();
    return p_.G ? base_bound() * d : base_bound() * std::sqrt(static_cast<double>(group(d)) * d);
  }

  void encode(const float* x, int64_t x_stride, int d, uint8_t* block) const override {
    const int tpb = tokens_per_block();
    std::vector<float> rot;
    if (p_.wht) {  // rotate a copy: [tpb, d]
      rot.resize(static_cast<size_t>(tpb) * d);
      for (int t = 0; t < tpb; ++t) std::memcpy(&rot[static_cast<size_t>(t) * d], x + t * x_stride, 4 * static_cast<size_t>(d));
      wht_rows(rot.data(), tpb, d);
      x = rot.data();
      x_stride = d;
    }
    std::vector<uint8_t> codes(static_cast<size_t>(tpb) * d);  // [tpb, d]
    if (p_.G) {
      for (int i = 0; i < d; ++i) {
        uint16_t s, z;
        quantize_group(x + i, x_stride, tpb, p_.bits, p_.clip, &codes[i], d, &s, &z);
        store_u16(block + 2 * i, s);
        store_u16(block + 2 * d + 2 * i, z);
      }
    } else {
      const int g = group(d), ng = d / g;
      for (int t = 0; t < tpb; ++t)
        for (int k = 0; k < ng; ++k) {
          uint16_t s, z;
          quantize_group(x + t * x_stride + k * g, 1, g, p_.bits, p_.clip, &codes[static_cast<size_t>(t) * d + k * g], 1,
                         &s, &z);
          store_u16(block + scale_offset(t, k), s);
          store_u16(block + min_offset(t, k, d), z);
        }
    }
    pack_codes(codes.data(), d, block + meta_bytes(d));
  }

  void decode(const uint8_t* block, int d, float* x) const override {
    decode_stored_basis(block, d, x);
    if (p_.wht) wht_rows(x, tokens_per_block(), d);
  }

  void scores(const float* q, int n_q, const SegmentView& seg, float scale, float* logits,
              int64_t ld) const override {
    const int d = seg.head_dim;
    if (int_tiles(d, /*key_op=*/true)) return scores_tiles(q, n_q, seg, scale, logits, ld);
    if (!tiled(d) && simd_units(d) && seg.block_bytes < (1 << 26)) {
      if (const intk::IntRowKernels::Scores rows = intk::int_row_kernels().scores_for(p_.bits))
        return rows(q, n_q, seg, intk::IntRowShape{d, p_.G, p_.G ? 0 : d / group(d)}, scale, logits, ld);
    }
    Tile& tile = tile_for(seg.head_dim);
    for (int64_t t0 = 0; t0 < seg.n_tokens; t0 += kTile) {
      const int n = static_cast<int>(std::min<int64_t>(kTile, seg.n_tokens - t0));
      dequant(seg, t0, n, tile);
      float_kernels::scores<float>(q, n_q, tile.view(n), scale, logits + t0, ld);
    }
  }
  void accumulate(const float* p, int64_t ld, int n_q, const SegmentView& seg, float* out) const override {
    if (int_tiles(seg.head_dim, /*key_op=*/false)) return accumulate_tiles(p, ld, n_q, seg, out);
    Tile& tile = tile_for(seg.head_dim);
    for (int64_t t0 = 0; t0 < seg.n_tokens; t0 += kTile) {
      const int n = static_cast<int>(std::min<int64_t>(kTile, seg.n_tokens - t0));
      dequant(seg, t0, n, tile);
      float_kernels::accumulate<float>(p + t0, ld, n_q, tile.view(n), out);
    }
  }

  // Tiled layouts with an integer kernel: 15/8-bit signed queries (key tiles), 14/7-bit probabilities (value tiles).
  FusedRounding fused_rounding(int d) const override {
    FusedRounding r;
    if (int_tiles(d, true)) r.query_bits = p_.dot_bits == 16 ? 15 : 8;
    if (int_tiles(d, false)) r.prob_bits = p_.dot_bits == 16 ? 14 : 7;
    return r;
  }

  int query_transform() const override { return p_.wht ? kWhtTransformId : 0; }
  void transform_query(float* q, int n_q, int d) const override {
    if (p_.wht) wht_rows(q, n_q, d);
  }
  int output_transform() const override { return p_.wht ? kWhtTransformId : 0; }
  void untransform_output(float* out, int n_rows, int d) const override {
    if (p_.wht) wht_rows(out, n_rows, d);
  }

 private:
  static constexpr int kWhtTransformId = 0x574854;  // "WHT": shared by every rotated codec

  // ---- layout ----
  int group(int d) const { return p_.g == 0 ? d : p_.g; }
  bool tiled(int d) const {
    if (p_.G) return p_.G % intt::kTileTokens == 0 && intt::tileable_bits(p_.bits) && d % intt::kTileChannels == 0;
    return p_.layout != TokenLayout::kRows;
  }
  bool key_tiles(int d) const { return p_.G ? tiled(d) : p_.layout == TokenLayout::kKeyTiles; }
  int64_t meta_bytes(int d) const { return p_.G ? 4LL * d : 4LL * tokens_per_block() * (d / group(d)); }
  // f16 scale / min of group k of token t (per-token codecs): rows blocks hold one token;
  // tiled blocks store each group's 16 tokens together.
  int64_t scale_offset(int t, int k) const {
    return p_.layout == TokenLayout::kRows ? 2LL * k : 2LL * (k * intt::kTileTokens + t);
  }
  int64_t min_offset(int t, int k, int d) const { return 2LL * tokens_per_block() * (d / group(d)) + scale_offset(t, k); }

  // codes: [tpb, d] -> the block's code area.
  void pack_codes(const uint8_t* codes, int d, uint8_t* dst) const {
    const int tpb = tokens_per_block();
    if (!tiled(d)) {
      for (int t = 0; t < tpb; ++t)
        intq::pack_row(codes + static_cast<size_t>(t) * d, d, p_.bits, dst + t * intq::row_bytes(d, p_.bits));
      return;
    }
    const int64_t tb = intt::tile_bytes(p_.bits), units = d / intt::kTileChannels;
    for (int tt = 0; tt < tpb / intt::kTileTokens; ++tt)
      for (int u = 0; u < units; ++u)
        intt::pack_tile(codes + static_cast<size_t>(tt) * intt::kTileTokens * d, d, u * intt::kTileChannels, p_.bits,
                        key_tiles(d), dst + (tt * units + u) * tb);
  }
  void unpack_codes(const uint8_t* src, int d, uint8_t* codes) const {
    const int tpb = tokens_per_block();
    if (!tiled(d)) {
      for (int t = 0; t < tpb; ++t)
        intq::unpack_row(src + t * intq::row_bytes(d, p_.bits), d, p_.bits, codes + static_cast<size_t>(t) * d);
      return;
    }
    const int64_t tb = intt::tile_bytes(p_.bits), units = d / intt::kTileChannels;
    for (int tt = 0; tt < tpb / intt::kTileTokens; ++tt)
      for (int u = 0; u < units; ++u)
        intt::unpack_tile(src + (tt * units + u) * tb, p_.bits, key_tiles(d),
                          codes + static_cast<size_t>(tt) * intt::kTileTokens * d, d, u * intt::kTileChannels);
  }

  // Scalar reference decode in the stored (possibly rotated) basis: x [tpb, d].
  void decode_stored_basis(const uint8_t* block, int d, float* x) const {
    const int tpb = tokens_per_block();
    thread_local std::vector<uint8_t> codes;  // [tpb, d]: grows once per thread, never per call
    if (codes.size() < static_cast<size_t>(tpb) * d) codes.resize(static_cast<size_t>(tpb) * d);
    unpack_codes(block + meta_bytes(d), d, codes.data());
    const int g = group(d);
    for (int t = 0; t < tpb; ++t)
      for (int i = 0; i < d; ++i) {
        const int64_t so = p_.G ? 2LL * i : scale_offset(t, i / g);
        const int64_t mo = p_.G ? 2LL * d + 2LL * i : min_offset(t, i / g, d);
        x[static_cast<size_t>(t) * d + i] = std::fma(static_cast<float>(codes[static_cast<size_t>(t) * d + i]),
                                                     fp16_to_fp32(load_u16(block + so)), fp16_to_fp32(load_u16(block + mo)));
      }
  }

  // ---- integer dots on tiles (int_kernels.h: one variant per SIMD tier) ----
  // Every tier without a kernel (scalar) takes the dequantizing path. At 8 bits the 15-bit
  // queries (dot=16) keep the rounding ~64x under the codes' own error (dot=8: about equal);
  // key tiles need each query step within kMaxDotChannels8 channels (exact int32 sums).
  bool int_tiles(int d, bool key_op) const {
    if (!tiled(d) || key_tiles(d) != key_op || !(p_.G || group(d) % intt::kTileChannels == 0)) return false;
    if (p_.bits == 8 && key_op && (p_.G ? (p_.dot_bits == 16 ? d : 32) : group(d)) > intt::kMaxDotChannels8) return false;
    const intk::IntTileKernels& k = intk::int_tile_kernels();
    return key_op ? k.scores_for(p_.bits, p_.dot_bits) != nullptr : k.accumulate_for(p_.bits, p_.dot_bits) != nullptr;
  }
  void scores_tiles(const float* q, int n_q, const SegmentView& seg, float scale, float* logits, int64_t ld) const {
    const int d = seg.head_dim;
    const intt::KeyTileShape shape{d, p_.G ? 0 : group(d), static_cast<int>(meta_bytes(d))};
    intk::int_tile_kernels().scores_for(p_.bits, p_.dot_bits)(q, n_q, seg, shape, scale, logits, ld);
  }
  void accumulate_tiles(const float* p, int64_t ld, int n_q, const SegmentView& seg, float* out) const {
    const int d = seg.head_dim;
    const intt::ValueTileShape shape{d, group(d), static_cast<int>(meta_bytes(d))};
    intk::int_tile_kernels().accumulate_for(p_.bits, p_.dot_bits)(p, ld, n_q, seg, shape, out);
  }

  // Scratch of one thread: the dequantized tile and a per-channel block's metadata.
  struct Tile {
    std::vector<float> rows;       // [kTile, d]
    std::vector<float> sc, mn;     // [d] per-channel scale / min of block `block`
    std::vector<float> blk;        // tiled layouts: block `block` decoded, [tpb, d]
    const uint8_t* block = nullptr;
    const uint8_t* page_ptr[1] = {nullptr};
    int d = 0;
    SegmentView view(int n) {
      page_ptr[0] = reinterpret_cast<const uint8_t*>(rows.data());
      SegmentView v;
      v.pages = page_ptr;
      v.n_tokens = n;
      v.blocks_per_page = kTile;
      v.block_bytes = 4 * d;
      v.head_dim = d;
      return v;
    }
  };
  static Tile& tile_for(int d) {
    thread_local Tile t;
    if (t.d != d) {
      t.d = d;
      t.rows.assign(static_cast<size_t>(kTile) * d, 0.0f);
      t.sc.assign(d, 0.0f);
      t.mn.assign(d, 0.0f);
    }
    t.block = nullptr;
    return t;
  }

  double base_bound() const {
    const double q = static_cast<double>((1 << p_.bits) - 1);
    return std::max(p_.clip / q, 1.0 - p_.clip) * (1.0 + 0x1p-8) + 0x1p-10;
  }

  // Every 16-code unit of a row lies in one group: the SIMD rows kernels apply.
  bool simd_units(int d) const { return d % 16 == 0 && (p_.G || group(d) % 16 == 0); }

  // Rows layouts only.
  intk::IntRowMeta row_meta(const uint8_t* block, int t, int d, const float* sc, const float* mn) const {
    intk::IntRowMeta m{};
    if (p_.G) {
      m.codes = block + 4 * d + t * intq::row_bytes(d, p_.bits);
      m.scale_c = sc;
      m.min_c = mn;
    } else {
      const int ng = d / group(d);
      m.scale_h = block;
      m.min_h = block + 2 * ng;
      m.g = group(d);
      m.codes = block + 4 * ng;
    }
    return m;
  }

  // Tokens [t0, t0 + n) of the view -> tile.rows [n, d].
  void dequant(const SegmentView& seg, int64_t t0, int n, Tile& tile) const {
    const int d = seg.head_dim, tpb = tokens_per_block();
    if (tiled(d)) {  // no integer kernel: the whole block through the scalar reference, once per block
      tile.blk.resize(static_cast<size_t>(tpb) * d);
      for (int j = 0; j < n; ++j) {
        const int64_t t = t0 + j;
        const uint8_t* block = seg.block(t / tpb);
        if (block != tile.block) {
          decode_stored_basis(block, d, tile.blk.data());
          tile.block = block;
        }
        std::memcpy(tile.rows.data() + static_cast<size_t>(j) * d, tile.blk.data() + (t % tpb) * d, sizeof(float) * d);
      }
      return;
    }
    // Units that straddle groups take the scalar reference (same values: same fma).
    const intk::IntRowKernels& k = simd_units(d) ? intk::int_row_kernels() : intk::kIntRowKernelsScalar;
    const intk::IntRowKernels::Dequantize dequantize = k.dequantize_for(p_.bits);
    for (int j = 0; j < n; ++j) {
      const int64_t t = t0 + j;
      const uint8_t* block = seg.block(t / tpb);
      if (p_.G && block != tile.block) {
        k.halves_to_floats(block, d, tile.sc.data());
        k.halves_to_floats(block + 2 * d, d, tile.mn.data());
        tile.block = block;
      }
      dequantize(row_meta(block, static_cast<int>(t % tpb), d, tile.sc.data(), tile.mn.data()), d,
                 tile.rows.data() + static_cast<size_t>(j) * d);
    }
  }

  IntParams p_;
  std::string name_;
};

// Registers intB, intBc, wht_intB, wht_intBc for B in {8, 4, 3, 2}.
bool register_int_codecs() {
  for (int bits : {8, 4, 3, 2})
    for (bool per_channel : {false, true})
      for (bool rot : {false, true}) {
        const std::string name = std::string(rot ? "wht_" : "") + "int" + std::to_string(bits) + (per_channel ? "c" : "");
        std::vector<ParamInfo> params;
        if (per_channel) params.push_back({"G", "32", "tokens per block (per-channel scale/min over G tokens), 1..1024"});
        else {
          params.push_back({"g", "32", "channels per group (must divide head_dim); 0 = head_dim"});
          params.push_back({"layout", "rows", "rows (1 token per block) | k | v: blocks of 16 tokens in tiles for 8-bit "
                                               "VNNI scores (k) or accumulate (v); bits 2, 4, 8, head_dim % 16 == 0"});
        }
        params.push_back({"clip", "1", "clipping ratio in (0, 1]: the group's range shrunk around its centre"});
        params.push_back({"dot", "auto", intt::kDotHelp});
        std::string help = std::to_string(bits) + "-bit uniform asymmetric, f16 scale+min per " +
                           (per_channel ? "channel over G tokens" : "group of g channels of a token") +
                           (rot ? ", rows Walsh-Hadamard rotated" : "");
        register_codec(CodecInfo{name, help, params, [=](const Spec& spec) -> Result<std::shared_ptr<const Codec>> {
                                   IntParams p;
                                   p.bits = bits;
                                   p.wht = rot;
                                   if (per_channel) {
                                     VLKV_ASSIGN_OR_RETURN(int64_t G, spec.get_int("G", 32, 1, 1024));
                                     p.G = static_cast<int>(G);
                                   } else {
                                     VLKV_ASSIGN_OR_RETURN(int64_t g, spec.get_int("g", 32, 0, 1024));
                                     if (g % 8 != 0)
                                       return invalid_argument("'" + name + "': g=" + std::to_string(g) +
                                                               " must be a multiple of 8 (e.g. 32, 64, 128) or 0 for head_dim");
                                     p.g = static_cast<int>(g);
                                     const std::string layout = spec.get_string("layout", "rows");
                                     if (layout == "k") p.layout = TokenLayout::kKeyTiles;
                                     else if (layout == "v") p.layout = TokenLayout::kValueTiles;
                                     else if (layout != "rows")
                                       return invalid_argument("'" + name + "': layout=" + layout +
                                                               " is not supported; valid: rows, k, v");
                                     if (p.layout != TokenLayout::kRows && !intt::tileable_bits(bits))
                                       return invalid_argument("'" + name + "': layout=" + layout +
                                                               " needs 2, 4 or 8 bits");
                                   }
                                   VLKV_ASSIGN_OR_RETURN(p.clip, spec.get_double("clip", 1.0, 0.05, 1.0));
                                   VLKV_ASSIGN_OR_RETURN(const int dot, intt::parse_dot_bits(spec, name));
                                   p.dot_bits = dot ? dot : intt::default_dot_bits(bits);
                                   return std::shared_ptr<const Codec>(std::make_shared<IntCodec>(p));
                                 }});
      }
  return true;
}

[[maybe_unused]] const bool g_int_codecs_registered = register_int_codecs();

}  // namespace
}  // namespace vlkv
