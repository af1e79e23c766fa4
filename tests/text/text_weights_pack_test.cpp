// bind_text_weights' load-time repack (quant/k_packed.h): on a tiny random Q4_K_M Llama, the
// K-quant matrices with rows % 8 == 0 are packed where the SIMD tier has the packed kernel, the
// output matrix (516 rows) keeps the file's layout, every packed row unpacks to the file's
// bytes, and prefill and decode logits equal those of the unpacked weights bit for bit
// (tolerance 0: the GEMM unpacks the same blocks, decode takes the same block steps). The repack
// on a thread pool (slices of ~2 MiB packed by whichever thread claims them) gives the same bytes
// as packing on the caller alone, for matrices spanning several slices and ones within one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "kv/kv_cache.h"
#include "quant/k_packed.h"
#include "quant/weight_format.h"
#include "random_model.h"
#include "text/decoder.h"
#include "text/hparams.h"
#include "text/text_weights.h"

namespace vlkv {
namespace {

struct TempFile {
  std::string path = testing::TempDir() + "/vlkv_pack_tiny_" + std::to_string(::getpid()) + ".gguf";
  ~TempFile() { std::remove(path.c_str()); }
};

// A tiny Q4_K_M Llama (4 heads of 64, 2 kv heads, n_embd 256).
RandomModelSpec tiny_q4_k_m(int n_layers, int n_ff, int n_vocab) {
  RandomModelSpec spec;
  spec.n_embd = 256;
  spec.n_layers = n_layers;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.head_dim = 64;
  spec.n_ff = n_ff;
  spec.n_vocab = n_vocab;
  spec.weight_type = GgmlType::kQ4_K;
  spec.k_m_mix = true;
  return spec;
}

std::vector<float> run(const TextHparams& hp, const TextWeights& w) {
  TextDecoder dec(hp, w);
  KvCacheConfig kc;
  kc.geometry = {static_cast<int>(hp.n_layers), static_cast<int>(hp.n_heads), static_cast<int>(hp.n_kv_heads),
                 static_cast<int>(hp.head_dim), 0};
  kc.method = "f16";
  kc.page_bytes = 4096;
  kc.budget_bytes = 16ull << 20;
  auto cache = std::move(KvCache::create(kc)).value();
  const SeqId id = cache->add_sequence().value();
  ThreadPool pool(2);
  std::vector<float> all;
  std::vector<int32_t> tokens;
  std::vector<int64_t> positions;
  for (int i = 0; i < 20; ++i) {
    tokens.push_back(3 + (i * 37) % 500);
    positions.push_back(i);
  }
  std::vector<TokenKind> kinds(tokens.size(), TokenKind::kText);
  auto step = [&](size_t b, size_t n) {
    DecoderInput in;
    in.n_tokens = static_cast<int64_t>(n);
    in.tokens = tokens.data() + b;
    in.positions = positions.data() + b;
    in.kinds = kinds.data() + b;
    std::vector<float> logits;
    EXPECT_TRUE(dec.forward(in, *cache, id, LogitsMode::kLast, logits, pool).is_ok());
    all.insert(all.end(), logits.begin(), logits.end());
  };
  step(0, 17);                                    // a prompt chunk: the GEMM
  for (size_t t = 17; t < 20; ++t) step(t, 1);    // decode tokens: the matvec
  return all;
}

TEST(TextWeightsPack, PackedWeightsGiveTheSameLogits) {
  TempFile file;
  // output (Q6_K) rows 516 % 8 != 0: keeps the file's layout
  const RandomModelSpec spec = tiny_q4_k_m(/*n_layers=*/2, /*n_ff=*/512, /*n_vocab=*/516);
  ASSERT_TRUE(write_random_llama(spec, file.path).is_ok());
  auto g = std::move(GgufFile::open(file.path)).value();
  const TextHparams hp = read_text_hparams(*g).value();
  const TextWeights plain = std::move(bind_text_weights(*g, hp, true, /*pack_rows=*/false)).value();
  const TextWeights packed = std::move(bind_text_weights(*g, hp, true, /*pack_rows=*/true)).value();

  EXPECT_FALSE(packed.output.packed_rows8);
  EXPECT_EQ(packed.output.data, plain.output.data);
  const bool kernel = quant::has_packed8_kernel(*find_weight_format(GgmlType::kQ4_K));
  int n_packed = 0;
  for (size_t l = 0; l < plain.layers.size(); ++l) {
    const LayerWeights &a = plain.layers[l], &b = packed.layers[l];
    for (size_t i = 0; i < a.matrices().size(); ++i) {
      const WeightMatrix *pm = a.matrices()[i], *qm = b.matrices()[i];
      EXPECT_FALSE(pm->packed_rows8);
      EXPECT_EQ(qm->packed_rows8, kernel) << "layer " << l << " " << ggml_type_name(qm->type);
      if (!qm->packed_rows8) continue;
      ++n_packed;
      std::vector<uint8_t> row(qm->row_bytes);
      for (int64_t r = 0; r < qm->n_rows; ++r) {
        quant::unpack_row8(qm->type, qm->data, qm->row_bytes, r, 0, qm->n_cols / 256, row.data());
        ASSERT_EQ(0, std::memcmp(row.data(), pm->data + r * pm->row_bytes, row.size())) << "layer " << l << " row " << r;
      }
    }
  }
  EXPECT_EQ(packed.packed_bytes > 0, n_packed > 0);
  EXPECT_EQ(run(hp, packed), run(hp, plain));
}

TEST(TextWeightsPackPool, PoolPacksTheSameBytes) {
  TempFile file;
  // ffn 16384 x 256 Q4_K = 2.25 MiB: more than one slice
  const RandomModelSpec spec = tiny_q4_k_m(/*n_layers=*/1, /*n_ff=*/16384, /*n_vocab=*/260);
  ASSERT_TRUE(write_random_llama(spec, file.path).is_ok());
  auto g = std::move(GgufFile::open(file.path)).value();
  const TextHparams hp = read_text_hparams(*g).value();
  ThreadPool pool(3);
  const TextWeights solo = std::move(bind_text_weights(*g, hp, true, true)).value();
  const TextWeights pooled = std::move(bind_text_weights(*g, hp, true, true, &pool)).value();
  EXPECT_EQ(solo.packed_bytes, pooled.packed_bytes);
  const LayerWeights &a = solo.layers[0], &b = pooled.layers[0];
  for (size_t i = 0; i < a.matrices().size(); ++i) {
    const WeightMatrix *sm = a.matrices()[i], *pm = b.matrices()[i];
    EXPECT_EQ(sm->packed_rows8, pm->packed_rows8);
    if (sm->packed_rows8) {
      EXPECT_NE(sm->data, pm->data);  // two arenas, not one shared
    }
    EXPECT_EQ(0, std::memcmp(sm->data, pm->data, sm->row_bytes * static_cast<size_t>(sm->n_rows)))
        << ggml_type_name(sm->type) << " " << sm->n_rows << " rows";
  }
}

}  // namespace
}  // namespace vlkv
