// libFuzzer target: the KV file loader. An input's first byte picks what the rest is:
// kContainerByte, a whole KV file's container (parse_kv_file: header, section table, CRC32s);
// otherwise a sequence's KV section, loaded with the method kSpecs[byte % kNumSpecs] into a
// small cache (KvCache::load_sequence: segments, codec blocks, every method's state checked
// against the segments). A sequence that loads is then read back and taken through a decode
// step and a longer step on every layer, so a state or segment the loader accepted but the
// method cannot use shows up as an ASan report, not only an unchecked read in the loader.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "engine/kv_file.h"
#include "kv/kv_cache.h"
#include "kv_file_fuzz_targets.h"

namespace {

using namespace vlkv;

std::unique_ptr<KvCache>& cache_for(int spec) {
  static std::unique_ptr<KvCache> caches[kvfuzz::kNumSpecs];
  if (!caches[spec]) {
    KvCacheConfig c;
    c.geometry = kvfuzz::geometry();
    c.method = kvfuzz::kSpecs[spec];
    c.page_bytes = 4096;
    c.budget_bytes = 16ull << 20;
    c.max_tokens_per_seq = 1 << 16;
    auto r = KvCache::create(c);
    if (!r.is_ok()) std::abort();  // the list holds valid specs
    caches[spec] = std::move(r).value();
  }
  return caches[spec];
}

void step(KvCache& c, SeqId seq, int n, ThreadPool& pool) {
  const KvGeometry g = kvfuzz::geometry();
  std::vector<float> q(static_cast<size_t>(n) * g.n_heads * g.head_dim, 0.25f);
  std::vector<float> k(static_cast<size_t>(n) * g.n_kv_heads * g.head_dim, -0.5f), v(k.size(), 0.75f);
  for (size_t i = 0; i < k.size(); ++i) k[i] += static_cast<float>(i % 7) * 0.1f;
  std::vector<TokenKind> kinds(static_cast<size_t>(n), TokenKind::kVisual);
  kinds[0] = TokenKind::kText;
  std::vector<float> out(q.size());
  for (int l = 0; l < g.n_layers; ++l)
    if (!c.attend(seq, l, q.data(), k.data(), v.data(), kinds.data(), n, 0.2f, out.data(), pool).is_ok()) {
      c.rollback(seq);
      return;
    }
  c.commit(seq, n);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] == kvfuzz::kContainerByte) {
    auto sections = parse_kv_file(data + 1, size - 1);
    if (sections.is_ok())
      for (const KvFileSectionView& s : *sections)
        if (s.size > 0 && (s.data < data + 1 || s.data + s.size > data + size)) std::abort();
    return 0;
  }
  const int spec = data[0] % kvfuzz::kNumSpecs;
  KvCache& c = *cache_for(spec);
  auto seq = c.load_sequence(c.method_name(), data + 1, size - 1);
  if (!seq.is_ok()) {
    if (c.bytes_in_use() != 0) std::abort();  // a refused section leaves no page taken
    return 0;
  }
  static ThreadPool pool(1);
  const KvGeometry g = kvfuzz::geometry();
  std::vector<float> kb, vb;
  for (int l = 0; l < g.n_layers; ++l)
    for (int h = 0; h < g.n_kv_heads; ++h) (void)c.read_back(*seq, l, h, &kb, &vb);
  (void)c.describe_sequence(*seq);
  step(c, *seq, 1, pool);
  step(c, *seq, 20, pool);
  std::string again;
  (void)c.save_sequence(*seq, &again);
  c.remove_sequence(*seq);
  return 0;
}
