// The tiny random Llama the batching tests share (decoder, scheduler): 4 layers, 4 heads,
// 2 kv heads of 64, written once per test process (ctest runs tests as parallel processes:
// each writes and maps its own file, named by its pid, and removes it at exit).
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <string>

#include "random_model.h"

namespace vlkv::batchtest {

struct TempModelFile {
  std::string path = testing::TempDir() + "/vlkv_batch_tiny_" + std::to_string(::getpid()) + ".gguf";
  ~TempModelFile() { std::remove(path.c_str()); }
};

inline const std::string& model_path() {
  static const TempModelFile file;
  static const std::string path = [] {
    RandomModelSpec spec;
    spec.n_embd = 256;
    spec.n_layers = 4;
    spec.n_heads = 4;
    spec.n_kv_heads = 2;
    spec.head_dim = 64;
    spec.n_ff = 512;
    spec.n_vocab = 512;
    const std::string& p = file.path;
    EXPECT_TRUE(write_random_llama(spec, p).is_ok());
    return p;
  }();
  return path;
}

}  // namespace vlkv::batchtest
