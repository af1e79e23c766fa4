// f32 codec: each token row stored as head_dim floats (lossless; the reference and
// the full-precision residual window of methods that keep one).
#include <cstring>

#include "kv/codec_registry.h"
#include "kv/codecs/float_kernels.h"

namespace vlkv {
namespace {

class F32Codec final : public Codec {
 public:
  const std::string& name() const override { return name_; }
  Status check_head_dim(int head_dim) const override {
    return head_dim > 0 ? Status::ok() : invalid_argument("f32 codec: head_dim must be positive");
  }
  int tokens_per_block() const override { return 1; }
  int64_t block_bytes(int head_dim) const override { return 4 * static_cast<int64_t>(head_dim); }
  double error_bound() const override { return 0.0; }

  void encode(const float* x, int64_t, int head_dim, uint8_t* block) const override {
    std::memcpy(block, x, 4 * static_cast<size_t>(head_dim));  // block: [head_dim] f32
  }
  void decode(const uint8_t* block, int head_dim, float* x) const override {
    std::memcpy(x, block, 4 * static_cast<size_t>(head_dim));
  }
  void scores(const float* q, int n_q, const SegmentView& seg, float scale, float* logits,
              int64_t ld) const override {
    float_kernels::scores<float>(q, n_q, seg, scale, logits, ld);
  }
  void accumulate(const float* p, int64_t ld, int n_q, const SegmentView& seg, float* out) const override {
    float_kernels::accumulate<float>(p, ld, n_q, seg, out);
  }

 private:
  std::string name_ = "f32";
};

}  // namespace

VLKV_REGISTER_CODEC(f32, CodecInfo{"f32", "32-bit float per element (lossless)", {},
                                   [](const Spec&) -> Result<std::shared_ptr<const Codec>> {
                                     return std::shared_ptr<const Codec>(std::make_shared<F32Codec>());
                                   }});

}  // namespace vlkv
