// bind_text_weights' repack on a thread pool: the slices (~2 MiB each) packed by whichever
// thread claims them give the same bytes as packing on the caller alone, for matrices that span
// several slices (n_ff 16384 x 256 Q4_K = 2.25 MiB) and ones that fit in one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "quant/weight_format.h"
#include "random_model.h"
#include "text/hparams.h"
#include "text/text_weights.h"

namespace vlkv {
namespace {

TEST(TextWeightsPackPool, PoolPacksTheSameBytes) {
  const std::string path = testing::TempDir() + "/vlkv_pack_pool_" + std::to_string(::getpid()) + ".gguf";
  RandomModelSpec spec;
  spec.n_embd = 256;
  spec.n_layers = 1;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.head_dim = 64;
  spec.n_ff = 16384;
  spec.n_vocab = 260;
  spec.weight_type = GgmlType::kQ4_K;
  spec.k_m_mix = true;
  const Status written = write_random_llama(spec, path);
  ASSERT_TRUE(written.is_ok()) << written.message();
  auto g = std::move(GgufFile::open(path)).value();
  std::remove(path.c_str());  // the mapping keeps the data
  const TextHparams hp = read_text_hparams(*g).value();
  ThreadPool pool(3);
  const TextWeights solo = std::move(bind_text_weights(*g, hp, true, true)).value();
  const TextWeights pooled = std::move(bind_text_weights(*g, hp, true, true, &pool)).value();
  EXPECT_EQ(solo.packed_bytes, pooled.packed_bytes);
  const LayerWeights &a = solo.layers[0], &b = pooled.layers[0];
  for (auto [sm, pm] : {std::pair{&a.wq, &b.wq}, std::pair{&a.wk, &b.wk}, std::pair{&a.wv, &b.wv},
                        std::pair{&a.wo, &b.wo}, std::pair{&a.w_gate, &b.w_gate}, std::pair{&a.w_up, &b.w_up},
                        std::pair{&a.w_down, &b.w_down}}) {
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
