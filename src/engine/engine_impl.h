// Engine internals shared by engine.cpp and session.cpp: the mapped model,
// decoder, tokenizer, KV cache and thread pool. Not part of the public API.
#pragma once

#include <memory>
#include <mutex>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "kv/kv_cache.h"
#include "text/chat_template.h"
#include "text/decoder.h"
#include "text/hparams.h"
#include "text/text_weights.h"
#include "text/tokenizer.h"
#include "vlkv/engine.h"

namespace vlkv {

struct Engine::Impl {
  EngineParams params;
  ModelInfo info;
  std::unique_ptr<GgufFile> gguf;
  TextHparams hparams;
  TextWeights weights;
  std::unique_ptr<TextDecoder> decoder;
  std::unique_ptr<Tokenizer> tokenizer;
  ChatTemplate chat_template = ChatTemplate::kNone;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<ThreadPool> pool;
  // One forward pass at a time: the pool and the cache are not re-entrant.
  std::mutex forward_mutex;
};

}  // namespace vlkv
