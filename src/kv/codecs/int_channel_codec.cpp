// Per-channel integer codec (intBc:G=.., KIVI's keys): one block of G tokens, each channel
// quantized over them, block = [d f16 scales][d f16 mins][codes]. The codes lie in key
// tiles (integer scores on the codes, int_tiles.h) whenever G % 16 == 0, B is 2, 4 or 8 and
// head_dim % 16 == 0, else in rows (G packed token rows: the rows kernels, as per token).
// Decided per head_dim, so one codec serves any model.
#include "kv/codecs/int_codec_layouts.h"
#include "kv/codecs/int_pack.h"
#include "kv/codecs/int_row_kernels.h"
#include "kv/codecs/int_tiles.h"

namespace vlkv::intc {
namespace {

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
