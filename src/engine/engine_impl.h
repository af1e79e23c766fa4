// Engine internals shared by engine.cpp, prompt.cpp and session.cpp: the mapped
// model, decoder, tokenizer, vision model, KV cache and thread pool. Not public API.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

#include "base/thread_pool.h"
#include "engine/content_hash.h"
#include "engine/video_frame_labels.h"
#include "gguf/gguf_reader.h"
#include "kv/kv_cache.h"
#include "text/chat_template.h"
#include "text/decoder.h"
#include "text/hparams.h"
#include "text/text_weights.h"
#include "text/tokenizer.h"
#include "vision/vision_model.h"
#include "vlkv/engine.h"

namespace vlkv {
class MediaCache;
}

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
  std::unique_ptr<GgufFile> mmproj;         // null for a text-only engine
  std::unique_ptr<VisionModel> vision;      // views into *mmproj
  // Text around each frame of a video, where the mmproj declares it (video_frame_labels.h).
  std::optional<VideoFrameLabels> video_frame_labels;
  std::unique_ptr<ThreadPool> pool;
  // One forward pass at a time: the pool and the cache are not re-entrant.
  std::mutex forward_mutex;
  // The KV method degrades without visual tokens: warned once per engine (Session).
  std::atomic<bool> warned_text_only{false};
  // Encoder outputs by content (media_cache.h); null without an mmproj or with
  // media_cache_bytes 0.
  std::shared_ptr<MediaCache> media_cache;
  // gguf_identity of the text model and of the mmproj (zero without one), computed at load:
  // KV files, media digests and shared prefix-cache keys name them.
  Digest128 model_id, mmproj_id;
  // What media digests (the encoder and prefix caches' keys) name the encoder by: mmproj_id, with
  // the image token bounds mixed in when set (they change every embedding).
  Digest128 media_id;
  // Media items the vision encoder ran on (encoder-cache hits and unencoded layouts not
  // counted): what a prefix hit that covers an item's rows saves.
  std::atomic<int64_t> n_media_encodes{0};
};

// Engine::prepare_prompt, callable from a Session (src/engine/prompt.cpp). encode_media
// false: Engine::prepare_prompt_unencoded.
Result<PreparedPrompt> prepare_prompt(Engine::Impl& engine, const Prompt& prompt, bool add_bos,
                                      const ProgressCallback& progress, bool encode_media = true);

}  // namespace vlkv
