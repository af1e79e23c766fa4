// Per-token integer codec in 16-token tiles (intB:g=..,layout=k|v; B = 2, 4, 8; head_dim
// a multiple of 16): block = [scales][mins][code tiles] with the metadata group-major,
// [n_groups][16 tokens] f16, so 16 tokens' scales load at once (int_tiles.h). Keys in key
// tiles feed the integer scores kernels, values in value tiles the integer accumulate
// kernels; the other op, and every op at a tier without a kernel (scalar), dequantizes
// whole blocks through the reference decode.
#include "kv/codecs/int_codec_layouts.h"
#include "kv/codecs/int_pack.h"
#include "kv/codecs/int_tiles.h"

namespace vlkv::intc {
namespace {

class IntTokenTilesCodec final : public IntCodecCore {
 public:
  using IntCodecCore::IntCodecCore;

  int tokens_per_block() const override { return intt::kTileTokens; }
  int64_t block_bytes(int d) const override { return meta_bytes(d) + intt::kTileTokens * intq::row_bytes(d, p_.bits); }

 private:
  bool tiled(int) const override { return true; }
  bool key_tiles(int) const override { return p_.layout == IntLayout::kKeyTiles; }
  int64_t meta_bytes(int d) const override { return 4LL * intt::kTileTokens * (d / group(d)); }
  int64_t scale_offset(int t, int i, int d) const override { return 2LL * (i / group(d) * intt::kTileTokens + t); }
  int64_t min_offset(int t, int i, int d) const override {
    return 2LL * intt::kTileTokens * (d / group(d)) + scale_offset(t, i, d);
  }
  // Tiled: the rows paths are never taken.
  intk::IntRowShape row_shape(int d) const override { return {d, 0, 0}; }
  void dequant_rows(const SegmentView&, int64_t, int, Scratch&) const override {}
};

}  // namespace

std::shared_ptr<const Codec> make_int_token_tiles_codec(const IntCodecParams& p) {
  return std::make_shared<IntTokenTilesCodec>(p);
}

}  // namespace vlkv::intc
