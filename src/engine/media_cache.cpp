// MediaCache: an LRU of encoder outputs by content digest, and the digests themselves.
#include "engine/media_cache.h"

namespace vlkv {

Digest128 media_content_digest(const MediaItem& item) {
  Sha256 h;
  h.update_string("vlkv media content v2");
  h.update_value(static_cast<uint8_t>(item.is_video ? 1 : 0));
  h.update_value(item.fps);
  h.update_value(static_cast<uint64_t>(item.frames.size()));
  for (const Image& f : item.frames) {
    h.update_value(f.width);
    h.update_value(f.height);
    h.update_value(static_cast<uint64_t>(f.pixels.size()));
    h.update(f.pixels.data(), f.pixels.size());
  }
  return h.finish128();
}

Digest128 media_digest(const Digest128& mmproj, const Digest128& content, double t_step) {
  Sha256 h;
  h.update_string("vlkv media v2");
  h.update_value(mmproj.hi);
  h.update_value(mmproj.lo);
  h.update_value(t_step);
  h.update_value(content.hi);
  h.update_value(content.lo);
  return h.finish128();
}

Digest128 cache_salt_digest(const std::string& salt) {
  if (salt.empty()) return {};
  Sha256 h;
  h.update_string("vlkv cache salt v1");
  h.update_string(salt);
  return h.finish128();
}

Digest128 salted_digest(const Digest128& digest, const Digest128& salt) {
  if (salt.is_zero()) return digest;
  Sha256 h;
  h.update_string("vlkv salted digest v1");
  h.update_value(salt.hi);
  h.update_value(salt.lo);
  h.update_value(digest.hi);
  h.update_value(digest.lo);
  return h.finish128();
}

Digest128 media_piece_digest(const Digest128& item, size_t index) {
  Sha256 h;
  h.update_string("vlkv media piece v1");
  h.update_value(item.hi);
  h.update_value(item.lo);
  h.update_value(static_cast<uint64_t>(index));
  return h.finish128();
}

uint64_t MediaCache::bytes_of(const MediaEmbedding& e) {
  uint64_t n = 0;
  for (const MediaPiece& p : e.pieces) n += p.embd.data.size() * sizeof(float) + p.text.size();
  return n;
}

std::optional<MediaEmbedding> MediaCache::find(const Digest128& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.misses;
    return std::nullopt;
  }
  ++stats_.hits;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void MediaCache::insert(const Digest128& key, const MediaEmbedding& embedding) {
  const uint64_t bytes = bytes_of(embedding);
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes > max_bytes_ || index_.count(key)) return;
  while (!lru_.empty() && stats_.bytes + bytes > max_bytes_) {
    stats_.bytes -= bytes_of(lru_.back().second);
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  lru_.emplace_front(key, embedding);
  index_[key] = lru_.begin();
  stats_.bytes += bytes;
}

MediaCache::Stats MediaCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Stats s = stats_;
  s.entries = static_cast<int64_t>(index_.size());
  return s;
}

}  // namespace vlkv
