// Per-token integer codec, rows layout (intB:g=..): one token per block,
//   block = [n_groups f16 scales][n_groups f16 mins][codes densely packed, int_pack.h],
// B + 32/g bits per element. Scores on the codes in place where the tier has a rows
// kernel (int_row_kernels.h: 24-bit query dots on 2/4-bit codes), else 16 tokens at a
// time dequantized by the row kernels into the core's scratch.
#include "kv/codecs/int_codec_layouts.h"
#include "kv/codecs/int_pack.h"
#include "kv/codecs/int_row_kernels.h"

namespace vlkv::intc {
namespace {

class IntTokenRowsCodec final : public IntCodecCore {
 public:
  using IntCodecCore::IntCodecCore;

  int tokens_per_block() const override { return 1; }
  int64_t block_bytes(int d) const override { return meta_bytes(d) + intq::row_bytes(d, p_.bits); }

 private:
  bool tiled(int) const override { return false; }
  bool key_tiles(int) const override { return false; }
  int64_t meta_bytes(int d) const override { return 4LL * (d / group(d)); }
  int64_t scale_offset(int, int i, int d) const override { return 2LL * (i / group(d)); }
  int64_t min_offset(int t, int i, int d) const override { return 2LL * (d / group(d)) + scale_offset(t, i, d); }

  intk::IntRowShape row_shape(int d) const override { return {d, 0, d / group(d)}; }

  void dequant_rows(const SegmentView& seg, int64_t t0, int n, Scratch& s) const override {
    const int d = seg.head_dim, ng = d / group(d);
    // Units that straddle groups take the scalar reference (same values: same fma).
    const intk::IntRowKernels& k = simd_units(d) ? intk::int_row_kernels() : intk::kIntRowKernelsScalar;
    const intk::IntRowKernels::Dequantize dequantize = k.dequantize_for(p_.bits);
    for (int j = 0; j < n; ++j) {
      const uint8_t* block = seg.block(t0 + j);
      intk::IntRowMeta m{};
      m.scale_h = block;
      m.min_h = block + 2 * ng;
      m.g = group(d);
      m.codes = block + 4 * ng;
      dequantize(m, d, s.rows.data() + static_cast<size_t>(j) * d);
    }
  }
};

}  // namespace

std::shared_ptr<const Codec> make_int_token_rows_codec(const IntCodecParams& p) {
  return std::make_shared<IntTokenRowsCodec>(p);
}

}  // namespace vlkv::intc
