// A method that stores every token of every layer with one codec for K and V in a
// single segment per (layer, kv head): the f32 / f16 baselines (and later int8/int4).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kv/codec_registry.h"
#include "kv/method.h"

namespace vlkv {

class SingleCodecMethod final : public Method {
 public:
  static Result<std::unique_ptr<Method>> create(const std::string& spec, const std::string& codec_spec,
                                                const KvGeometry& g) {
    return create(spec, make_codec(codec_spec), g);
  }
  static Result<std::unique_ptr<Method>> create(const std::string& spec, Result<std::shared_ptr<const Codec>> made,
                                                const KvGeometry& g) {
    VLKV_ASSIGN_OR_RETURN(std::shared_ptr<const Codec> codec, std::move(made));
    VLKV_RETURN_IF_ERROR(codec->check_head_dim(g.head_dim));
    return std::unique_ptr<Method>(new SingleCodecMethod(spec, std::move(codec), g));
  }

  const std::string& spec() const override { return spec_; }
  std::vector<const Codec*> codecs() const override { return {codec_.get()}; }

  Status store(const StoreInput& in, LayerEditor& ed) const override {
    const int n_kv = ed.n_kv_heads(), d = ed.head_dim();
    for (int h = 0; h < n_kv; ++h) {
      if (ed.segments(h).empty()) ed.add_segment(h, codec_.get(), codec_.get(), /*tag=*/0);
      // k, v rows of head h: [n_new, head_dim] with stride n_kv_heads * head_dim
      VLKV_RETURN_IF_ERROR(ed.append(h, 0, in.k + h * d, in.v + h * d, static_cast<int64_t>(n_kv) * d, in.n_new));
    }
    return Status::ok();
  }

  double bits_per_element() const override { return codec_->bits_per_element(geometry_.head_dim); }
  double bytes_per_token() const override {
    return 2.0 * geometry_.n_layers * geometry_.n_kv_heads * static_cast<double>(codec_->block_bytes(geometry_.head_dim)) /
           codec_->tokens_per_block();
  }
  double error_bound() const override { return codec_->error_bound(); }

 private:
  SingleCodecMethod(std::string spec, std::shared_ptr<const Codec> codec, const KvGeometry& g)
      : spec_(std::move(spec)), codec_(std::move(codec)), geometry_(g) {}
  std::string spec_;
  std::shared_ptr<const Codec> codec_;
  KvGeometry geometry_;
};

}  // namespace vlkv
