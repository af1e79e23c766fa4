#include "random_tensor.h"

#include <cmath>
#include <cstring>
#include <random>

#include "base/fp16.h"
#include "gguf/ggml_type_info.h"
#include "quant/weight_format.h"

namespace vlkv {

// A per-tensor seed, so each tensor's values do not depend on the order of generation.
uint64_t tensor_seed(uint64_t seed, const std::string& name) {
  uint64_t h = seed ^ 0x9e3779b97f4a7c15ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  h ^= h >> 31;  // splitmix-style finalizer
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}

Status encode_row(GgmlType type, const float* src, int64_t n, uint8_t* dst) {
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return Status::ok();
    case GgmlType::kF16:
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = type == GgmlType::kF16 ? fp32_to_fp16(src[i]) : fp32_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return Status::ok();
    default: {
      const WeightFormat* wf = find_weight_format(type);
      if (!wf || !wf->quantize_row_ref) {
        return unsupported(std::string("no quantizer for weight type ") + ggml_type_info(type)->name);
      }
      wf->quantize_row_ref(src, dst, n);
      return Status::ok();
    }
  }
}

Status add_random(GgufWriter& w, const std::string& name, GgmlType type, std::vector<int64_t> dims, Init init,
                  uint64_t seed) {
  const int64_t row = dims[0];
  int64_t n_rows = 1;
  for (size_t i = 1; i < dims.size(); ++i) n_rows *= dims[i];
  // Fan-in of y = W x is the row length (ggml's dims[0]); of a conv kernel [kw, kh, c_in, c_out],
  // everything but the output channels.
  const int64_t fan_in = dims.size() > 2 ? row * n_rows / dims.back() : row;
  const float stddev = init == Init::kEmbedding ? std::sqrt(0.5f)
                       : init == Init::kLinear  ? 1.0f / std::sqrt(static_cast<float>(fan_in))
                       : init == Init::kNorm    ? 0.1f
                                                : 0.02f;
  const float mean = init == Init::kNorm ? 1.0f : 0.0f;
  const uint64_t rng_seed = tensor_seed(seed, name);
  auto fill = [=](uint8_t* dst, size_t n_bytes) -> Status {
    std::mt19937_64 rng(rng_seed);
    std::normal_distribution<float> dist(mean, stddev);
    std::vector<float> buf(static_cast<size_t>(row));  // [row]
    const size_t row_bytes = n_bytes / static_cast<size_t>(n_rows);
    for (int64_t r = 0; r < n_rows; ++r) {
      for (float& x : buf) x = dist(rng);
      VLKV_RETURN_IF_ERROR(encode_row(type, buf.data(), row, dst + static_cast<size_t>(r) * row_bytes));
    }
    return Status::ok();
  };
  return w.add_tensor(name, type, std::move(dims), fill);
}

}  // namespace vlkv
