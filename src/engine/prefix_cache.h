// The prefix cache (issue 22, docs/prefix_cache.md): KV sequences kept after a request
// evaluated a prefix of its prompt, found again by a later request whose prompt starts with
// the same content, which then copies the entry into its own sequence and evaluates only
// the rest. Keys are content, never placeholder ids: a text row is its token id, a media
// row the SHA-256 digest of its item (pixels, preprocessing, mmproj; PromptChunk::content_*)
// and its index in the item, plus, for a method that reads the visual-text similarity,
// that similarity's bits. Entries are per KV method spec and per feed chunk size: a kivi2
// request never reads f16 entries, and an entry holds exactly the bytes a request feeding
// the same rows in the same forward passes would store (the Scheduler only makes and uses
// entries at such boundaries), so a hit changes no output bit.
//
// Entries are whole sequences of the KvCache (copy_sequence: pages and the method's
// per-sequence state), so they count against --kv-budget; the cache caps them at its own
// budget and evicts least recently used first. Not thread safe: the Scheduler calls it
// under its lock and the engine's forward lock.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/kv_cache.h"
#include "vlkv/scheduler.h"  // PrefixCacheMethodStats
#include "vlkv/status.h"

namespace vlkv {

// What one prompt row's K/V are a function of, next to the rows before it.
struct RowKey {
  uint64_t a = 0, b = 0;
  bool operator==(const RowKey&) const = default;
};


class PrefixCache {
 public:
  // max_bytes: the pages entries may hold together (0: the cache keeps nothing).
  PrefixCache(KvCache& kv, uint64_t max_bytes) : kv_(kv), max_bytes_(max_bytes) {}
  ~PrefixCache();  // removes every entry's sequence
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  bool enabled() const { return max_bytes_ > 0; }
  uint64_t max_bytes() const { return max_bytes_; }

  struct Hit {
    int64_t id = -1;     // entry id (-1: none)
    SeqId seq = -1;
    int64_t n_tokens = 0;
  };
  // The longest entry of (method, chunk) whose rows are the first rows of `rows`, with at
  // most max_n tokens and accepted by boundary(n) (the caller's chunk boundaries); touched.
  template <typename Boundary>
  Hit find(const std::string& method, int64_t chunk, std::span<const RowKey> rows, int64_t max_n,
           const Boundary& boundary);
  // A request's lookup for the metrics: n_cached tokens taken from an entry (0: a miss).
  void count_lookup(const std::string& method, int64_t n_cached);
  // The entry is in use now (least recently used last).
  void touch(int64_t id);
  // Keeps a copy of src (its n_tokens() first rows are rows[0, n)) as an entry, evicting
  // least recently used entries until it fits both the cache's budget and `room` (the
  // bytes the cache may hold in the KV pool now, its entries included). False when it does
  // not fit, the copy runs out of pages, or the entry exists (then it is touched).
  // replaces: an entry whose rows are the first rows of `rows` (the turn this request
  // continues), dropped first (copies are whole: keeping both would hold its rows twice).
  // owner: whose entry (vlkv serve: a tenant), for set_owner_cap.
  bool insert(SeqId src, const std::string& method, int64_t chunk, std::span<const RowKey> rows, uint64_t room,
              int64_t replaces = -1, uint64_t owner = 0);
  // A request's admission whose media rows its method keeps no entries for (metrics).
  void count_media_not_kept(const std::string& method) { ++method_stats(method).media_not_kept; }
  // Takes sequence seq (rows[0, n), e.g. loaded from a PrefixStore) as an entry itself, under
  // the same caps as insert (room: counting seq's pages as the cache's). False when it does
  // not fit or the entry exists: the caller still owns seq then.
  bool adopt(SeqId seq, const std::string& method, int64_t chunk, std::span<const RowKey> rows, uint64_t room,
             uint64_t owner = 0);
  // The most bytes one owner's entries may hold together (0: no cap): an owner's new entry
  // evicts that owner's least recently used entries first, so with a cap of at most
  // max_bytes / owners no owner's entries push out another's.
  void set_owner_cap(uint64_t bytes) { owner_cap_ = bytes; }
  uint64_t owner_bytes(uint64_t owner) const {
    auto it = owner_bytes_.find(owner);
    return it == owner_bytes_.end() ? 0 : it->second;
  }
  // Called with each entry about to be evicted (not when the cache is destroyed): its
  // sequence, still whole, and its key. The Scheduler spills it to --cache-dir.
  using EvictHook = std::function<void(SeqId seq, const std::string& method, int64_t chunk, std::span<const RowKey> rows)>;
  void set_evict_hook(EvictHook hook) { evict_hook_ = std::move(hook); }
  // Evicts the least recently used entry other than `keep`; false when there is none.
  bool evict_lru(int64_t keep = -1);
  // Evicts least recently used entries until `bytes` are freed or none is left; the bytes freed.
  uint64_t evict_bytes(uint64_t bytes, int64_t keep = -1);

  uint64_t bytes() const { return bytes_; }
  int64_t n_entries() const { return static_cast<int64_t>(entries_.size()); }
  std::vector<PrefixCacheMethodStats> stats() const;
  // Tests: InternalError naming the first broken invariant (bytes and counts add up, the
  // index and the LRU list hold exactly the entries, every entry's sequence holds its tokens).
  Status check_invariants() const;

  // The chain hash of rows[0, n) for (method, chunk), for every n in 1..rows.size():
  // out[n-1]. An index only; entries are compared row by row.
  static void chain_hashes(const std::string& method, int64_t chunk, std::span<const RowKey> rows,
                           std::vector<uint64_t>& out);

 private:
  struct Entry {
    int64_t id = 0;
    SeqId seq = -1;
    std::string method;
    int64_t chunk = 0;
    std::vector<RowKey> rows;
    uint64_t hash = 0;   // chain hash of all its rows
    uint64_t bytes = 0;  // its sequence's pages
    uint64_t owner = 0;
    std::list<int64_t>::iterator lru;
  };
  PrefixCacheMethodStats& method_stats(const std::string& method);
  // Evicts least recently used entries until need more bytes fit min(budget, room); whether they do.
  bool make_room(uint64_t need, uint64_t room);
  // Evicts owner's least recently used entries until need more bytes fit owner_cap_; whether they do.
  bool make_owner_room(uint64_t owner, uint64_t need);
  void evict(std::map<int64_t, Entry>::iterator it);
  void add_entry(SeqId seq, const std::string& method, int64_t chunk, std::span<const RowKey> rows, uint64_t owner);
  void erase(std::map<int64_t, Entry>::iterator it);

  KvCache& kv_;
  uint64_t max_bytes_;
  uint64_t bytes_ = 0;
  int64_t next_id_ = 0;
  std::map<int64_t, Entry> entries_;
  std::list<int64_t> lru_;  // most recent first
  std::unordered_multimap<uint64_t, int64_t> by_hash_;
  std::map<std::pair<std::string, int64_t>, std::multiset<int64_t>> lengths_;  // (method, chunk) -> entry lengths
  std::map<std::string, PrefixCacheMethodStats> stats_;
  uint64_t owner_cap_ = 0;
  std::map<uint64_t, uint64_t> owner_bytes_;  // owner -> its entries' bytes (owners with entries only)
  EvictHook evict_hook_;
};

template <typename Boundary>
PrefixCache::Hit PrefixCache::find(const std::string& method, int64_t chunk, std::span<const RowKey> rows,
                                   int64_t max_n, const Boundary& boundary) {
  Hit hit;
  auto lens = lengths_.find({method, chunk});
  max_n = std::min<int64_t>(max_n, static_cast<int64_t>(rows.size()));
  if (lens != lengths_.end() && max_n > 0) {
    std::vector<uint64_t> h;
    chain_hashes(method, chunk, rows.first(static_cast<size_t>(max_n)), h);
    for (auto n = lens->second.rbegin(); n != lens->second.rend() && hit.id < 0; ++n) {
      if (*n > max_n || !boundary(*n)) continue;
      auto [lo, hi] = by_hash_.equal_range(h[static_cast<size_t>(*n - 1)]);
      for (auto it = lo; it != hi; ++it) {
        const Entry& e = entries_.at(it->second);
        if (e.method != method || e.chunk != chunk || static_cast<int64_t>(e.rows.size()) != *n) continue;
        if (!std::equal(e.rows.begin(), e.rows.end(), rows.begin())) continue;
        hit = Hit{e.id, e.seq, *n};
        break;
      }
    }
  }
  if (hit.id >= 0) touch(hit.id);
  return hit;
}

}  // namespace vlkv
