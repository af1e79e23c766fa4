// The vision encoder's outputs kept by content (issue 22): a media item that comes back
// (an OpenAI client resends a conversation's images every turn) is not encoded again.
// Keyed by media_digest(): the pixels, the preprocessing that depends on the request
// (video or image, frame count, fps) and the mmproj's identity. LRU under a byte cap.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "engine/content_hash.h"
#include "vision/vision_model.h"
#include "vlkv/engine.h"

namespace vlkv {

// A media item's content: image or video, fps, frame count, every frame's size and pixels.
// Hashed once per item and request; media_digest and KV files' media hashes derive from it.
Digest128 media_content_digest(const MediaItem& item);
// What KV files record of it (docs/kv_file.md): its first 64 bits.
inline uint64_t media_content_hash(const Digest128& content) { return content.hi; }

// What an item's encoding is a function of: the mmproj's identity (gguf_identity), the
// fps-derived temporal step and its content digest. Two different pictures of the same size differ.
Digest128 media_digest(const Digest128& mmproj, const Digest128& content, double t_step);

// A cache salt's digest (Prompt::cache_salt; {0, 0} for ""), and a digest salted by it
// (unchanged for {0, 0}): what the encoder cache and the prefix cache key a salted item by.
Digest128 cache_salt_digest(const std::string& salt);
Digest128 salted_digest(const Digest128& digest, const Digest128& salt);

// The digest of piece `index` of an item (a video may be several embedding runs).
Digest128 media_piece_digest(const Digest128& item, size_t index);

class MediaCache {
 public:
  explicit MediaCache(uint64_t max_bytes) : max_bytes_(max_bytes) {}
  // A copy of the kept encoding (most recently used now), or nothing.
  std::optional<MediaEmbedding> find(const Digest128& key);
  // Keeps an encoding (evicting the least recently used); one larger than the cap is not kept.
  void insert(const Digest128& key, const MediaEmbedding& embedding);

  struct Stats {
    int64_t hits = 0, misses = 0, entries = 0;
    uint64_t bytes = 0;
  };
  Stats stats() const;

 private:
  using Lru = std::list<std::pair<Digest128, MediaEmbedding>>;
  struct Less {
    bool operator()(const Digest128& a, const Digest128& b) const {
      return a.hi != b.hi ? a.hi < b.hi : a.lo < b.lo;
    }
  };
  static uint64_t bytes_of(const MediaEmbedding& e);
  uint64_t max_bytes_;
  mutable std::mutex mutex_;
  Lru lru_;  // most recent first
  std::map<Digest128, Lru::iterator, Less> index_;
  Stats stats_;
};

}  // namespace vlkv
