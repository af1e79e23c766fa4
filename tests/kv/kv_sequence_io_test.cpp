// KvCache::save_sequence / load_sequence (kv_sequence_io.h) for every method of the fuzz
// list (fuzz/kv_file_fuzz_targets.h: one spec per registered method, windows small enough to
// fold): a loaded sequence reads back and attends bit for bit as the saved one, the bytes are
// the same at every SIMD tier, every truncation is refused without a page left taken, and a
// section over the free budget is refused before allocating. Also writes the fuzzer's seeds.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../fuzz/kv_file_fuzz_targets.h"
#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "kv/kv_cache.h"
#include "kv/method_registry.h"
#include "kv_test_util.h"

namespace vlkv {
namespace {

using kvfuzz::geometry;
using kvfuzz::kSpecs;

constexpr float kScale = 0.17f;

// One step of n tokens on every layer (random q, k, v from seed; kinds given), committed.
void step(KvCache& c, SeqId seq, const std::vector<TokenKind>& kinds, uint32_t seed, ThreadPool& pool,
          std::vector<float>* outs = nullptr) {
  const KvGeometry g = geometry();
  const int n = static_cast<int>(kinds.size());
  for (int l = 0; l < g.n_layers; ++l) {
    const auto q = kvtest::random_vec(static_cast<size_t>(n) * g.n_heads * g.head_dim, seed * 31 + l);
    const auto k = kvtest::random_vec(static_cast<size_t>(n) * g.n_kv_heads * g.head_dim, seed * 37 + l);
    const auto v = kvtest::random_vec(k.size(), seed * 41 + l);
    std::vector<float> out(q.size());
    ASSERT_TRUE(c.attend(seq, l, q.data(), k.data(), v.data(), kinds.data(), n, kScale, out.data(), pool).is_ok());
    if (outs) outs->insert(outs->end(), out.begin(), out.end());
  }
  c.commit(seq, n);
}

// A prompt (text, 24 visual, text) and three decode steps.
void fill(KvCache& c, SeqId seq, ThreadPool& pool) {
  std::vector<TokenKind> prompt(4, TokenKind::kSpecial);
  prompt.insert(prompt.end(), 24, TokenKind::kVisual);
  prompt.insert(prompt.end(), 12, TokenKind::kText);
  step(c, seq, prompt, 1, pool);
  for (uint32_t s = 2; s < 5; ++s) step(c, seq, {TokenKind::kText}, s, pool);
}

std::string saved(const std::string& spec, ThreadPool& pool) {
  auto c = kvtest::small_page_cache(spec, geometry());
  if (!c) return {};
  Result<SeqId> seq = c->add_sequence();
  EXPECT_TRUE(seq.is_ok());
  fill(*c, *seq, pool);
  std::string bytes;
  EXPECT_TRUE(c->save_sequence(*seq, &bytes).is_ok());
  return bytes;
}

TEST(KvSequenceIo, FuzzListCoversEveryMethod) {
  for (const MethodInfo* m : list_methods()) {
    bool found = false;
    for (const char* s : kSpecs) found = found || std::string(s).rfind(m->name, 0) == 0;
    EXPECT_TRUE(found) << m->name << " is missing from fuzz/kv_file_fuzz_targets.h";
  }
}

TEST(KvSequenceIo, LoadedSequenceReadsBackAndAttendsBitForBit) {
  ThreadPool pool(1);
  const KvGeometry g = geometry();
  for (const char* spec : kSpecs) {
    SCOPED_TRACE(spec);
    auto c = kvtest::small_page_cache(spec, g);
    ASSERT_TRUE(c);
    Result<SeqId> a = c->add_sequence();
    ASSERT_TRUE(a.is_ok());
    fill(*c, *a, pool);
    std::string bytes;
    ASSERT_TRUE(c->save_sequence(*a, &bytes).is_ok());
    Result<SeqId> b = c->load_sequence(c->sequence_method(*a), reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ASSERT_TRUE(b.is_ok()) << b.status().message();
    EXPECT_EQ(c->n_tokens(*b), c->n_tokens(*a));
    EXPECT_EQ(c->stored_bytes(*b), c->stored_bytes(*a));
    EXPECT_EQ(c->sequence_bytes(*b), c->sequence_bytes(*a));
    EXPECT_EQ(c->describe_sequence(*b), c->describe_sequence(*a));
    for (int l = 0; l < g.n_layers; ++l) {
      std::vector<float> ka, va, kb, vb;
      ASSERT_TRUE(c->read_back(*a, l, 0, &ka, &va).is_ok());
      ASSERT_TRUE(c->read_back(*b, l, 0, &kb, &vb).is_ok());
      EXPECT_TRUE(ka == kb && va == vb) << "layer " << l;
    }
    // The next steps (a decode step, then a longer one that folds) attend and store the same.
    for (const std::vector<TokenKind>& kinds :
         {std::vector<TokenKind>{TokenKind::kText}, std::vector<TokenKind>(20, TokenKind::kVisual)}) {
      std::vector<float> oa, ob;
      step(*c, *a, kinds, 9, pool, &oa);
      step(*c, *b, kinds, 9, pool, &ob);
      EXPECT_EQ(std::memcmp(oa.data(), ob.data(), oa.size() * sizeof(float)), 0);
    }
    std::string again_a, again_b;
    ASSERT_TRUE(c->save_sequence(*a, &again_a).is_ok());
    ASSERT_TRUE(c->save_sequence(*b, &again_b).is_ok());
    EXPECT_TRUE(again_a == again_b);
  }
}

// What a file holds is what the pages hold, and those are the same bytes at every SIMD tier
// (tests/kv/codec_test.cpp checks the codecs' encoders; this checks whole sequences, the
// methods' choices from attention statistics included). Methods whose state keeps the
// statistics themselves (zipvl's accumulated attention mass, Q Cache's JSD sums: floats from
// the SIMD softmax, which rounds differently per tier) save other state bytes per tier; their
// stored rows (every layer and head, decoded) and codec bytes per sequence are still equal.
TEST(KvSequenceIo, SameBytesAtEverySimdTier) {
  kvtest::SimdLevelGuard guard;
  ThreadPool pool(1);
  const KvGeometry g = geometry();
  for (const char* spec : kSpecs) {
    SCOPED_TRACE(spec);
    const std::string name(spec);
    const bool float_state = name.rfind("zipvl", 0) == 0 || name.rfind("qcache", 0) == 0;
    std::string reference;
    std::vector<std::vector<float>> ref_rows;
    double ref_stored = 0;
    for (SimdTier tier : kvtest::simd_tiers()) {
      set_simd_tier_for_testing(tier);
      auto c = kvtest::small_page_cache(spec, g);
      ASSERT_TRUE(c);
      Result<SeqId> seq = c->add_sequence();
      ASSERT_TRUE(seq.is_ok());
      fill(*c, *seq, pool);
      std::string bytes;
      ASSERT_TRUE(c->save_sequence(*seq, &bytes).is_ok());
      std::vector<std::vector<float>> rows;  // decoded at one tier (vidkv's inverse FFT rounds per tier)
      set_simd_tier_for_testing(SimdTier::kScalar);
      for (int l = 0; l < g.n_layers; ++l) {
        std::vector<float> k, v;
        ASSERT_TRUE(c->read_back(*seq, l, 0, &k, &v).is_ok());
        rows.push_back(k);
        rows.push_back(v);
      }
      if (reference.empty()) {
        reference = bytes;
        ref_rows = rows;
        ref_stored = c->stored_bytes(*seq);
        continue;
      }
      if (!float_state) {
        EXPECT_TRUE(bytes == reference) << "tier " << static_cast<int>(tier) << " stores other bytes";
      }
      EXPECT_TRUE(rows == ref_rows) << "tier " << static_cast<int>(tier) << " stores other rows";
      EXPECT_EQ(c->stored_bytes(*seq), ref_stored);
    }
  }
}

TEST(KvSequenceIo, EveryTruncationAndAForeignMethodAreRefused) {
  ThreadPool pool(1);
  for (const char* spec : {"f16", "kivi2:residual=4,g=8", "zipvl:rescore=8,g=8", "akvq_vl:window=8", "qcache_vla:grouping=prefill,n_lazy=1"}) {
    SCOPED_TRACE(spec);
    const std::string bytes = saved(spec, pool);
    auto c = kvtest::small_page_cache(spec, geometry());
    ASSERT_TRUE(c);
    const std::string method = c->method_name();
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    for (size_t n = 0; n < bytes.size(); n += n < 512 ? 1 : 61) {
      Result<SeqId> s = c->load_sequence(method, p, n);
      ASSERT_FALSE(s.is_ok()) << "accepted " << n << " of " << bytes.size() << " bytes";
      EXPECT_EQ(s.status().code(), StatusCode::kInvalidFile);
      ASSERT_EQ(c->bytes_in_use(), 0u);
    }
    ASSERT_TRUE(c->load_sequence(method, p, bytes.size()).is_ok());
    // Under another method the codecs or states do not match.
    const std::string other = std::string(spec) == "f16" ? "int8" : "f16";
    Result<SeqId> s = c->load_sequence(other, p, bytes.size());
    EXPECT_FALSE(s.is_ok());
  }
}

// A Q Cache file whose grouping=prefill state is edited back to "not frozen" (the lazy layers
// have already dropped their keys): the per-sequence state is the section's last field, a flag
// byte, a u64 length, then the state's own bytes (frozen flag, base vector, JSD tables, ...).
std::string unfrozen(const std::string& bytes) {
  for (size_t o = bytes.size() - 9; o > 0; --o) {
    uint64_t len = 0;
    std::memcpy(&len, bytes.data() + o + 1, 8);
    if (bytes[o] != 1 || len != bytes.size() - o - 9) continue;
    const std::string state = bytes.substr(o + 9);
    uint64_t n_base = 0;
    std::memcpy(&n_base, state.data() + 1, 8);
    std::string edited(1, '\0');
    edited.append(8, '\0');  // an empty base vector, as an unfrozen state holds
    edited += state.substr(9 + n_base * sizeof(int32_t));
    std::string out = bytes.substr(0, o + 1);
    const uint64_t new_len = edited.size();
    out.append(reinterpret_cast<const char*>(&new_len), 8);
    return out + edited;
  }
  return {};
}

// Q Cache's lazy layers store no keys of their own: a file saved under one grouping and loaded
// under another, or with its per-sequence grouping edited, would leave a layer with key-less
// segments and no layer to take keys from. The loader refuses it (attention would stop the
// process: kv_file_fuzzer found the edited case).
TEST(KvSequenceIo, KeylessSegmentsWithoutAKeySourceAreRefused) {
  ThreadPool pool(1);
  for (const char* mode : {"qcache_gla", "qcache_vla"}) {
    SCOPED_TRACE(mode);
    auto refused = [&](const std::string& spec, const std::string& bytes) {
      SCOPED_TRACE(spec);
      auto c = kvtest::small_page_cache(spec, geometry());
      ASSERT_TRUE(c);
      Result<SeqId> s = c->load_sequence(c->method_name(), reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ASSERT_FALSE(s.is_ok());
      EXPECT_EQ(s.status().code(), StatusCode::kInvalidFile);
      EXPECT_NE(s.status().message().find("without keys"), std::string::npos) << s.status().message();
      EXPECT_EQ(c->bytes_in_use(), 0u);
    };
    const std::string fixed = saved(std::string(mode) + ":lazy=1", pool);
    ASSERT_FALSE(fixed.empty());
    refused(std::string(mode) + ":lazy=2", fixed);
    refused(std::string(mode) + ":lazy=none", fixed);
    const std::string prefill_spec = std::string(mode) + ":grouping=prefill,n_lazy=1";
    const std::string prefill = saved(prefill_spec, pool);
    const std::string edited = unfrozen(prefill);
    ASSERT_FALSE(edited.empty());
    refused(prefill_spec, edited);
    // Unedited, each loads and decodes.
    for (const auto& [spec, bytes] : {std::pair{std::string(mode) + ":lazy=1", fixed}, std::pair{prefill_spec, prefill}}) {
      auto c = kvtest::small_page_cache(spec, geometry());
      ASSERT_TRUE(c);
      Result<SeqId> s = c->load_sequence(c->method_name(), reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ASSERT_TRUE(s.is_ok()) << s.status().message();
      step(*c, *s, {TokenKind::kText}, 7, pool);
    }
  }
}

TEST(KvSequenceIo, OverTheFreeBudgetRefusedBeforeAllocating) {
  ThreadPool pool(1);
  const std::string bytes = saved("f16", pool);
  auto c = kvtest::small_page_cache("f16", geometry(), 8192);
  ASSERT_TRUE(c);
  Result<SeqId> s = c->load_sequence("f16", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().code(), StatusCode::kOutOfMemory);
  EXPECT_NE(s.status().message().find("raise --kv-budget"), std::string::npos) << s.status().message();
  EXPECT_EQ(c->bytes_in_use(), 0u);
}

// This process's peak resident set (VmHWM) since reset_own_peak().
uint64_t own_status_bytes(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  const size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, field, n) == 0) kb = std::strtoull(line + n, nullptr, 10);
  std::fclose(f);
  return kb * 1024;
}
void reset_own_peak() {
  if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

// f16 bytes with every stream's blocks per page multiplied: a stream's page then takes that
// many blocks' bytes while the file holds only the blocks its tokens fill.
std::string with_blocks_per_page_times(const std::string& bytes, int32_t factor) {
  std::string out = bytes;
  int patched = 0;
  for (size_t at = out.find("f16"); at != std::string::npos && at + 11 <= out.size(); at = out.find("f16", at + 1)) {
    int32_t bpp = 0, bb = 0;
    std::memcpy(&bpp, out.data() + at + 3, 4);
    std::memcpy(&bb, out.data() + at + 7, 4);
    if (bb <= 0 || bpp != 4096 / bb) continue;  // small_page_cache's 4 KiB pages
    bpp *= factor;
    std::memcpy(out.data() + at + 3, &bpp, 4);
    ++patched;
  }
  EXPECT_GT(patched, 0);
  return out;
}

// A small KV section declaring pages of 64 MiB (blocks_per_page x 1024) was within the old
// bound (1 GiB a page) and the free budget, and took a 64 MiB page per stream, each zeroed
// past its few blocks: a 159 KB Redis value took the server from 42 MB to 2.0 GB. Pages are
// the pool's size or the file is refused, before any is taken.
TEST(KvSequenceIo, PagesLargerThanThePoolsRefusedBeforeAllocating) {
  ThreadPool pool(1);
  const std::string bytes = with_blocks_per_page_times(saved("f16", pool), 1 << 14);
  auto c = kvtest::small_page_cache("f16", geometry(), 2ull << 30);
  ASSERT_TRUE(c);
  reset_own_peak();
  const uint64_t before = own_status_bytes("VmRSS:");
  const auto t0 = std::chrono::steady_clock::now();
  Result<SeqId> s = c->load_sequence("f16", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t peak = own_status_bytes("VmHWM:");
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidFile);
  EXPECT_NE(s.status().message().find("saved with another KV page size"), std::string::npos) << s.status().message();
  EXPECT_EQ(c->bytes_in_use(), 0u);
  EXPECT_LT(seconds, 1.0);
  EXPECT_LT(peak, before + (64u << 20)) << before << " -> peak " << peak;
  // The same bytes with the pool's pages load.
  const std::string good = saved("f16", pool);
  ASSERT_TRUE(c->load_sequence("f16", reinterpret_cast<const uint8_t*>(good.data()), good.size()).is_ok());
}

// A head's segment count is checked against the bytes left before the segments are allocated
// (65535 of them were allocated, ~13 MB a head, and refused only at the first missing one).
TEST(KvSequenceIo, SegmentCountBeyondTheBytesRefusedAtTheCount) {
  ThreadPool pool(1);
  std::string bytes = saved("f16", pool);
  // n_layers, n_kv_heads, head_dim (u32), tokens (i64), layer 0's tokens (i64), then its head 0's count.
  const size_t at = 3 * 4 + 8 + 8;
  const uint32_t n = 65535;
  std::memcpy(bytes.data() + at, &n, 4);
  auto c = kvtest::small_page_cache("f16", geometry());
  Result<SeqId> s = c->load_sequence("f16", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("segment count 65535 out of range"), std::string::npos) << s.status().message();
}

// The fuzzer's seed corpus: VLKV_KV_FUZZ_SEEDS=fuzz/corpus/kv_file ./build/tests/kv_tests
// --gtest_filter=KvSequenceIo.FuzzSeeds writes one seed per spec (its index byte, then the
// sequence's bytes), and regress seeds of inputs that once stopped the fuzzer.
TEST(KvSequenceIo, FuzzSeeds) {
  const char* dir = std::getenv("VLKV_KV_FUZZ_SEEDS");
  if (!dir) GTEST_SKIP() << "set VLKV_KV_FUZZ_SEEDS=DIR to write the seeds";
  ThreadPool pool(1);
  auto write_seed = [&](const std::string& name, int spec, const std::string& bytes) {
    const std::string path = std::string(dir) + "/" + name + "_" + std::to_string(spec) + ".bin";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    const uint8_t sel = static_cast<uint8_t>(spec);
    EXPECT_EQ(std::fwrite(&sel, 1, 1, f), 1u);
    EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
  };
  for (int i = 0; i < kvfuzz::kNumSpecs; ++i) {
    const std::string bytes = saved(kSpecs[i], pool);
    write_seed("seq", i, bytes);
    // Pages larger than the pool's (PagesLargerThanThePoolsRefusedBeforeAllocating) as a regress
    // seed: 256 KiB ones, within the fuzzer's 16 MiB budget (which refused the test's 64 MiB).
    if (std::string(kSpecs[i]) == "f16") write_seed("regress_big_pages", i, with_blocks_per_page_times(bytes, 64));
    // Q Cache's edited grouping state (KeylessSegmentsWithoutAKeySourceAreRefused) as a regress seed.
    if (std::string(kSpecs[i]).find("grouping=prefill") != std::string::npos) {
      ASSERT_FALSE(unfrozen(bytes).empty());
      write_seed("regress_keyless", i, unfrozen(bytes));
    }
  }
}

}  // namespace
}  // namespace vlkv
