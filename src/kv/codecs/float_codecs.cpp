// The float codecs: each token row stored as head_dim values of one float type.
// - f32: floats (lossless; the reference and the full-precision residual window of methods
//   that keep one);
// - f16: IEEE halves rounded to nearest even (exactly fp32_to_fp16), relative error <= 2^-11
//   in the normal range.
#include <cstring>
#include <type_traits>

#include "kv/codec_registry.h"
#include "kv/codecs/float_kernels.h"

namespace vlkv {
namespace {

template <class T>  // float (f32) or uint16_t (f16 bits)
class FloatCodec final : public Codec {
  static constexpr bool kHalf = std::is_same_v<T, uint16_t>;

 public:
  const std::string& name() const override { return name_; }
  Status check_head_dim(int head_dim) const override {
    return head_dim > 0 ? Status::ok() : invalid_argument(name_ + " codec: head_dim must be positive");
  }
  int tokens_per_block() const override { return 1; }
  int64_t block_bytes(int head_dim) const override { return static_cast<int64_t>(sizeof(T)) * head_dim; }
  // Half rounds to nearest with 11 significant bits: |err| <= 2^-11 |x| (normal range).
  double error_bound() const override { return kHalf ? 1.0 / 2048.0 : 0.0; }

  void encode(const float* x, int64_t, int head_dim, uint8_t* block) const override {
    if constexpr (kHalf) {
      uint16_t* h = reinterpret_cast<uint16_t*>(block);  // [head_dim] f16
      for (int i = 0; i < head_dim; ++i) h[i] = fp32_to_fp16(x[i]);
    } else {
      std::memcpy(block, x, 4 * static_cast<size_t>(head_dim));  // block: [head_dim] f32
    }
  }
  void decode(const uint8_t* block, int head_dim, float* x) const override {
    if constexpr (kHalf) {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(block);
      for (int i = 0; i < head_dim; ++i) x[i] = fp16_to_fp32(h[i]);
    } else {
      std::memcpy(x, block, 4 * static_cast<size_t>(head_dim));
    }
  }
  void scores(const float* q, int n_q, const SegmentView& seg, float scale, float* logits,
              int64_t ld) const override {
    float_kernels::scores<T>(q, n_q, seg, scale, logits, ld);
  }
  void accumulate(const float* p, int64_t ld, int n_q, const SegmentView& seg, float* out) const override {
    float_kernels::accumulate<T>(p, ld, n_q, seg, out);
  }

 private:
  std::string name_ = kHalf ? "f16" : "f32";
};

template <class T>
Result<std::shared_ptr<const Codec>> make_float_codec(const Spec&) {
  return std::shared_ptr<const Codec>(std::make_shared<FloatCodec<T>>());
}

}  // namespace

VLKV_REGISTER_CODEC(f32, CodecInfo{"f32", "32-bit float per element (lossless)", {}, make_float_codec<float>});
VLKV_REGISTER_CODEC(f16, CodecInfo{"f16", "IEEE half per element (round to nearest even)", {},
                                   make_float_codec<uint16_t>});

}  // namespace vlkv
