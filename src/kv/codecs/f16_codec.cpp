// f16 codec: each token row stored as head_dim IEEE halves, rounded to nearest even
// (exactly fp32_to_fp16). Relative error <= 2^-11 in the normal range.
#include "kv/codec_registry.h"
#include "kv/codecs/float_kernels.h"

namespace vlkv {
namespace {

class F16Codec final : public Codec {
 public:
  const std::string& name() const override { return name_; }
  Status check_head_dim(int head_dim) const override {
    return head_dim > 0 ? Status::ok() : invalid_argument("f16 codec: head_dim must be positive");
  }
  int tokens_per_block() const override { return 1; }
  int64_t block_bytes(int head_dim) const override { return 2 * static_cast<int64_t>(head_dim); }
  // Half rounds to nearest with 11 significant bits: |err| <= 2^-11 |x| (normal range).
  double error_bound() const override { return 1.0 / 2048.0; }

  void encode(const float* x, int64_t, int head_dim, uint8_t* block) const override {
    uint16_t* h = reinterpret_cast<uint16_t*>(block);  // [head_dim] f16
    for (int i = 0; i < head_dim; ++i) h[i] = fp32_to_fp16(x[i]);
  }
  void decode(const uint8_t* block, int head_dim, float* x) const override {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(block);
    for (int i = 0; i < head_dim; ++i) x[i] = fp16_to_fp32(h[i]);
  }
  void scores(const float* q, int n_q, const SegmentView& seg, float scale, float* logits,
              int64_t ld) const override {
    float_kernels::scores<uint16_t>(q, n_q, seg, scale, logits, ld);
  }
  void accumulate(const float* p, int64_t ld, int n_q, const SegmentView& seg, float* out) const override {
    float_kernels::accumulate<uint16_t>(p, ld, n_q, seg, out);
  }

 private:
  std::string name_ = "f16";
};

}  // namespace

VLKV_REGISTER_CODEC(f16, CodecInfo{"f16", "IEEE half per element (round to nearest even)", {},
                                   [](const Spec&) -> Result<std::shared_ptr<const Codec>> {
                                     return std::shared_ptr<const Codec>(std::make_shared<F16Codec>());
                                   }});

}  // namespace vlkv
