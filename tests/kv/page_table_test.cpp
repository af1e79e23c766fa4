#include "kv/page_table.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kv/codec_registry.h"
#include "kv/layer_editor.h"
#include "kv_test_util.h"

namespace vlkv {
namespace {

constexpr int kDim = 16;

// A sequence with 2 layers x 1 kv head, one f32 segment of n tokens per layer.
SeqId make_seq(PageTable& table, PagePool& pool, const Codec* codec, int n, uint32_t seed) {
  SequenceCache s;
  s.layers.resize(2);
  for (auto& l : s.layers) l.heads.resize(1);
  const SeqId id = table.add(std::move(s));
  SequenceCache* seq = table.find(id);
  const std::vector<float> x = kvtest::random_vec(static_cast<size_t>(n) * kDim, seed);  // [n, kDim]
  for (int l = 0; l < 2; ++l) {
    LayerEditor ed(pool, seq->layers[l], seq->pending, l, kDim);
    const int si = ed.add_segment(0, codec, codec, 0);
    EXPECT_TRUE(ed.append(0, si, x.data(), x.data(), kDim, n).is_ok());
    seq->layers[l].n_tokens = n;
  }
  seq->pending = PendingStep{};  // as if committed
  seq->n_tokens = n;
  return id;
}

std::vector<float> contents(const PageTable& table, SeqId id, int layer) {
  const Segment& s = table.find(id)->layers[layer].heads[0].segments[0];
  std::vector<float> k(static_cast<size_t>(s.n_tokens) * kDim);
  read_stream(s.k, 0, s.n_tokens, kDim, k.data());
  return k;
}

TEST(PageTable, AddRemoveCopyAccountsEveryPage) {
  auto codec = make_codec("f32");
  ASSERT_TRUE(codec.is_ok());
  PagePool pool(64 * 256, 256);  // 4 tokens of 16 f32 per page
  PageTable table(pool);
  const SeqId a = make_seq(table, pool, codec->get(), 10, 1);  // 3 pages per stream, 4 streams
  EXPECT_EQ(table.n_pages(a), 12);
  EXPECT_EQ(pool.pages_in_use(), 12);
  const SeqId b = make_seq(table, pool, codec->get(), 1, 2);
  EXPECT_EQ(table.n_pages(b), 4);
  EXPECT_EQ(pool.pages_in_use(), 16);

  ASSERT_TRUE(table.copy(a, b).is_ok());  // deep copy: b's old pages freed, a's duplicated
  EXPECT_EQ(table.n_pages(b), 12);
  EXPECT_EQ(pool.pages_in_use(), 24);
  EXPECT_EQ(table.find(b)->n_tokens, 10);
  EXPECT_EQ(contents(table, a, 1), contents(table, b, 1));
  // Separate pages: a's contents survive b's removal.
  const auto before = contents(table, a, 0);
  table.remove(b);
  EXPECT_EQ(pool.pages_in_use(), 12);
  EXPECT_EQ(contents(table, a, 0), before);
  table.remove(a);
  EXPECT_EQ(pool.pages_in_use(), 0);
  EXPECT_TRUE(table.ids().empty());
}

TEST(PageTable, CopyOutOfMemoryLeavesDestinationUnchanged) {
  auto codec = make_codec("f32");
  PagePool pool(20 * 256, 256);
  PageTable table(pool);
  const SeqId a = make_seq(table, pool, codec->get(), 10, 1);  // 12 pages
  const SeqId b = make_seq(table, pool, codec->get(), 2, 3);   // 4 pages; 4 left
  const auto b0 = contents(table, b, 0);
  Status st = table.copy(a, b);
  EXPECT_EQ(st.code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(pool.pages_in_use(), 16);
  EXPECT_EQ(table.find(b)->n_tokens, 2);
  EXPECT_EQ(contents(table, b, 0), b0);
}

}  // namespace
}  // namespace vlkv
