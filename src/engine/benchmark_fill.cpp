// Session::fill_kv_for_benchmark: a benchmarking aid (vlkv bench --fill random) that
// brings the KV cache to a depth without running the model, so decode can be timed at
// 8K-32K tokens on a small machine. Not an inference path: the stored rows are noise.
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/engine_impl.h"
#include "engine/kv_save.h"

namespace vlkv {
namespace {

// splitmix64: fast, seedable, good enough for benchmark noise.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Approximately N(0, 1): the sum of four uniforms on [0, 1) (16 bits each of one draw),
// centred and scaled to unit variance (Irwin-Hall). ~1 ns per value, where
// std::normal_distribution would take seconds for the 10^8-10^9 values of a 32K fill.
void fill_gaussian(std::vector<float>& x, uint64_t& state) {
  constexpr float kScale = 1.7320508f / 65536.0f;  // sqrt(12 / 4) per 16-bit unit
  for (float& value : x) {
    const uint64_t r = next_random(state);
    const uint32_t sum = static_cast<uint32_t>(r & 0xFFFF) + static_cast<uint32_t>((r >> 16) & 0xFFFF) +
                         static_cast<uint32_t>((r >> 32) & 0xFFFF) + static_cast<uint32_t>(r >> 48);
    value = (static_cast<float>(sum) - 2.0f * 65535.0f) * kScale;
  }
}

}  // namespace

Status Session::fill_kv_for_benchmark(int64_t n_tokens, uint64_t seed) {
  if (n_tokens <= 0) return invalid_argument("fill_kv_for_benchmark: n_tokens must be positive");
  VLKV_RETURN_IF_ERROR(check_room(n_tokens, "fill tokens"));
  std::lock_guard<std::mutex> lock(engine_->forward_mutex);
  KvCache& kv = *engine_->kv;
  const TextHparams& hp = engine_->hparams;
  const int64_t n_batch = engine_->params.n_batch;
  const int64_t kv_row = hp.n_kv_heads * hp.head_dim, q_row = hp.n_heads * hp.head_dim;
  uint64_t state = seed;
  std::vector<float> k, v, q, out;
  std::vector<TokenKind> kinds;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
  for (int64_t begin = 0; begin < n_tokens; begin += n_batch) {
    const int n = static_cast<int>(std::min(n_batch, n_tokens - begin));
    kinds.assign(static_cast<size_t>(n), TokenKind::kText);
    k.resize(static_cast<size_t>(n * kv_row));
    v.resize(k.size());
    q.resize(static_cast<size_t>(n * q_row));
    for (int layer = 0; layer < static_cast<int>(hp.n_layers); ++layer) {
      fill_gaussian(k, state);
      fill_gaussian(v, state);
      fill_gaussian(q, state);  // for methods that need attention statistics: their probe rows only
      Status st = kv.store_without_attention(seq_, layer, k.data(), v.data(), kinds.data(), n, q.data(), scale,
                                             engine_->pool.get());
      if (st.code() == StatusCode::kUnsupported) {  // a method that cannot store without attending
        out.resize(q.size());
        st = kv.attend(seq_, layer, q.data(), k.data(), v.data(), kinds.data(), n, scale, out.data(), *engine_->pool);
      }
      if (!st.is_ok()) {
        kv.rollback(seq_);
        return st;
      }
    }
    kv.commit(seq_, n);
    n_past_ += n;
    next_pos_ += n;
    history_->synthetic = true;
  }
  return Status::ok();
}

}  // namespace vlkv
