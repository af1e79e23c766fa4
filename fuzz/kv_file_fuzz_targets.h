// What the KV file fuzzer loads into (fuzz/kv_file_fuzzer.cpp) and what its seeds are made
// from (tests/kv/kv_sequence_io_test.cpp, KvSequenceIo.FuzzSeeds): a small geometry and one
// spec per method, with windows small enough that a few dozen tokens fold.
#pragma once

#include "kv/kv_types.h"

namespace vlkv::kvfuzz {

inline KvGeometry geometry() {
  KvGeometry g;
  g.n_layers = 3;
  g.n_heads = 2;
  g.n_kv_heads = 1;
  g.head_dim = 32;
  return g;
}

// An input's first byte selects (modulo the count) the method its KV section is loaded with;
// a first byte of kContainerByte parses the rest as a whole KV file's container.
inline constexpr const char* kSpecs[] = {
    "f16",           "f32",
    "int8",          "int4",
    "int2",          "int3",
    "kivi2:residual=4,g=8", "kivi:bits=4,residual=0,g=16",
    "vidkv:window=8,g=8",   "zipvl:rescore=8,g=8",
    "akvq_vl:window=8", "qcache_gla:grouping=prefill,n_lazy=1",
    "qcache_vla:grouping=prefill,n_lazy=1",
};
inline constexpr int kNumSpecs = static_cast<int>(sizeof kSpecs / sizeof kSpecs[0]);
inline constexpr uint8_t kContainerByte = 0xff;

}  // namespace vlkv::kvfuzz
