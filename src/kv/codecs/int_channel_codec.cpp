// Per-channel integer codec (intBc:G=.., KIVI's keys): one block of G tokens, each channel
// quantized over them, block = [d f16 scales][d f16 mins][codes]. The codes lie in key
// tiles (integer scores on the codes, int_tiles.h) whenever G % 16 == 0, B is 2, 4 or 8 and
// head_dim % 16 == 0, else in rows (G packed token rows: the rows kernels, as per token).
// Decided per head_dim, so one codec serves any model.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kv/codecs/int_codec_layouts.h"
#include "kv/codecs/int_pack.h"
#include "kv/codecs/int_row_kernels.h"
#include "kv/codecs/int_tiles.h"

namespace vlkv::intc {
namespace {

// kCodes2.v[b] = the four 2-bit codes of byte b, low bits first, as floats.
struct Codes2Table {
  float v[256][4];
  constexpr Codes2Table() : v() {
    for (int b = 0; b < 256; ++b)
      for (int j = 0; j < 4; ++j) v[b][j] = static_cast<float>((b >> (2 * j)) & 3);
  }
};
constexpr Codes2Table kCodes2{};

class IntChannelCodec final : public IntCodecCore {
 public:
  using IntCodecCore::IntCodecCore;

  int tokens_per_block() const override { return p_.G; }
  int64_t block_bytes(int d) const override { return meta_bytes(d) + p_.G * intq::row_bytes(d, p_.bits); }

 private:
  bool tiled(int d) const override {
    return p_.G % intt::kTileTokens == 0 && intt::tileable_bits(p_.bits) && d % intt::kTileChannels == 0;
  }
  bool key_tiles(int d) const override { return tiled(d); }
  int64_t meta_bytes(int d) const override { return 4LL * d; }
  int64_t scale_offset(int, int i, int) const override { return 2LL * i; }
  int64_t min_offset(int, int i, int d) const override { return 2LL * d + 2LL * i; }

  intk::IntRowShape row_shape(int d) const override { return {d, p_.G, 0}; }

  // 2-bit values stored per channel (VidKV's salient values): no integer kernel reads key tiles
  // as values, and the core's fallback dequantizes element by element through decode() (vidkv
  // decoded at 1/6 of f16's speed at 3K tokens on tinyvideo, 2048 visual tokens). Here a table
  // turns the codes into floats, the tier's f32 kernel sums them, and each channel's affine map
  // is applied after the sums: sum_t p_t (c_t s + m) = s sum_t p_t c_t + m sum_t p_t.
  void accumulate(const float* p, int64_t ld, int n_q, const SegmentView& seg, float* out) const override {
    const int d = seg.head_dim, tpb = p_.G;
    if (!tiled(d) || p_.bits != 2) return IntCodecCore::accumulate(p, ld, n_q, seg, out);
    Scratch& s = scratch_for(d);
    s.block = nullptr;  // s.sc / s.mn are rewritten below
    // The block's codes as floats, each 16-channel tile's in [byte k][quad j] order (channel 4j + k):
    // four table rows per token and tile.
    thread_local std::vector<float> codes_tl, acc_tl;
    codes_tl.resize(static_cast<size_t>(tpb) * d);
    acc_tl.resize(static_cast<size_t>(n_q) * d);
    float* const codes = codes_tl.data();
    float* const acc = acc_tl.data();
    const intk::IntRowKernels& k = simd_units(d) ? intk::int_row_kernels() : intk::kIntRowKernelsScalar;
    const int units = d / intt::kTileChannels;
    const int64_t tb = intt::tile_bytes(2);
    for (int64_t t0 = 0; t0 < seg.n_tokens; t0 += tpb) {
      const int n = static_cast<int>(std::min<int64_t>(tpb, seg.n_tokens - t0));
      const uint8_t* block = seg.block(t0 / tpb);
      const uint8_t* tiles = block + meta_bytes(d);
      k.halves_to_floats(block, d, s.sc.data());
      k.halves_to_floats(block + 2 * d, d, s.mn.data());
      for (int t = 0; t < n; ++t) {
        // 2-bit key tile (int_tiles.h): token t's 16 channels are bytes 4 (t % 16) + k, channel 4j + k at bits 2j.
        const uint8_t* bytes = tiles + (t / intt::kTileTokens) * units * tb + 4 * (t % intt::kTileTokens);
        float* row = codes + static_cast<size_t>(t) * d;
        for (int u = 0; u < units; ++u)
          for (int kb = 0; kb < 4; ++kb) std::memcpy(row + u * 16 + kb * 4, kCodes2.v[bytes[u * tb + kb]], 4 * sizeof(float));
      }
      // acc[r] = sum_t p[r][t] codes_t: the f32 kernels of the CPU's tier over the float codes.
      const uint8_t* page[1] = {reinterpret_cast<const uint8_t*>(codes)};
      SegmentView rows;
      rows.pages = page;
      rows.n_tokens = n;
      rows.blocks_per_page = n;
      rows.block_bytes = static_cast<int32_t>(sizeof(float)) * d;
      rows.head_dim = d;
      std::fill(acc, acc + static_cast<size_t>(n_q) * d, 0.0f);
      float_kernels::accumulate<float>(p + t0, ld, n_q, rows, acc);
      for (int r = 0; r < n_q; ++r) {
        const float* pr = p + r * ld + t0;
        float mass = 0;
        for (int t = 0; t < n; ++t) mass += pr[t];
        const float* a = acc + static_cast<size_t>(r) * d;
        float* o = out + static_cast<int64_t>(r) * d;
        for (int u = 0; u < units; ++u)
          for (int kb = 0; kb < 4; ++kb)
            for (int j = 0; j < 4; ++j) {
              const int ch = u * intt::kTileChannels + 4 * j + kb;
              o[ch] += s.sc[static_cast<size_t>(ch)] * a[u * intt::kTileChannels + kb * 4 + j] +
                       s.mn[static_cast<size_t>(ch)] * mass;
            }
      }
    }
  }

  void dequant_rows(const SegmentView& seg, int64_t t0, int n, Scratch& s) const override {
    const int d = seg.head_dim, tpb = p_.G;
    const intk::IntRowKernels& k = simd_units(d) ? intk::int_row_kernels() : intk::kIntRowKernelsScalar;
    const intk::IntRowKernels::Dequantize dequantize = k.dequantize_for(p_.bits);
    for (int j = 0; j < n; ++j) {
      const int64_t t = t0 + j;
      const uint8_t* block = seg.block(t / tpb);
      if (block != s.block) {  // the block's per-channel scales and mins, once per block
        k.halves_to_floats(block, d, s.sc.data());
        k.halves_to_floats(block + 2 * d, d, s.mn.data());
        s.block = block;
      }
      intk::IntRowMeta m{};
      m.codes = block + 4 * d + (t % tpb) * intq::row_bytes(d, p_.bits);
      m.scale_c = s.sc.data();
      m.min_c = s.mn.data();
      dequantize(m, d, s.rows.data() + static_cast<size_t>(j) * d);
    }
  }
};

}  // namespace

std::shared_ptr<const Codec> make_int_channel_codec(const IntCodecParams& p) {
  return std::make_shared<IntChannelCodec>(p);
}

}  // namespace vlkv::intc
