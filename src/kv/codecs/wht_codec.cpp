#include "kv/codecs/wht_codec.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kv/codecs/wht.h"

namespace vlkv {
namespace {

constexpr int kWhtTransformId = 0x574854;  // "WHT": shared by every rotated codec

class WhtCodec final : public Codec {
 public:
  explicit WhtCodec(std::shared_ptr<const Codec> inner) : inner_(std::move(inner)), name_("wht_" + inner_->name()) {}

  const std::string& name() const override { return name_; }
  Status check_head_dim(int d) const override {
    if (Status st = inner_->check_head_dim(d); !st.is_ok()) return st;
    if (!is_power_of_two(d) || d > kMaxWhtHeadDim)
      return invalid_argument(name_.substr(0, name_.find(':')) +
                              ": the Walsh-Hadamard rotation needs head_dim a power of two <= " +
                              std::to_string(kMaxWhtHeadDim) + ", got " + std::to_string(d));
    return Status::ok();
  }
  int tokens_per_block() const override { return inner_->tokens_per_block(); }
  int64_t block_bytes(int d) const override { return inner_->block_bytes(d); }
  double error_bound() const override { return inner_->error_bound(); }
  double error_bound_at(int d) const override { return inner_->error_bound_at(d); }
  double rms_error_bound() const override { return inner_->rms_error_bound(); }

  void encode(const float* x, int64_t x_stride, int d, uint8_t* block) const override {
    const int tpb = tokens_per_block();
    std::vector<float> rot(static_cast<size_t>(tpb) * d);  // a rotated copy: [tpb, d]
    for (int t = 0; t < tpb; ++t) std::memcpy(&rot[static_cast<size_t>(t) * d], x + t * x_stride, 4 * static_cast<size_t>(d));
    wht_rows(rot.data(), tpb, d);
    inner_->encode(rot.data(), d, d, block);
  }
  void decode(const uint8_t* block, int d, float* x) const override {
    inner_->decode(block, d, x);
    wht_rows(x, tokens_per_block(), d);
  }

  void scores(const float* q, int n_q, const SegmentView& seg, float scale, float* logits,
              int64_t ld) const override {
    inner_->scores(q, n_q, seg, scale, logits, ld);
  }
  void accumulate(const float* p, int64_t ld, int n_q, const SegmentView& seg, float* out) const override {
    inner_->accumulate(p, ld, n_q, seg, out);
  }
  FusedRounding fused_rounding(int d) const override { return inner_->fused_rounding(d); }

  int query_transform() const override { return kWhtTransformId; }
  void transform_query(float* q, int n_q, int d) const override { wht_rows(q, n_q, d); }
  int output_transform() const override { return kWhtTransformId; }
  void untransform_output(float* out, int n_rows, int d) const override { wht_rows(out, n_rows, d); }

 private:
  std::shared_ptr<const Codec> inner_;
  std::string name_;
};

}  // namespace

std::shared_ptr<const Codec> make_wht_codec(std::shared_ptr<const Codec> inner) {
  return std::make_shared<WhtCodec>(std::move(inner));
}

}  // namespace vlkv
