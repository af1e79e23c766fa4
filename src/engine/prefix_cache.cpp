// PrefixCache: entries (KvCache sequences) by content, an LRU list, a chain-hash index.
#include "engine/prefix_cache.h"

namespace vlkv {

namespace {

// splitmix64's finalizer: a well-mixed 64-bit index (not a security boundary: entries are
// compared row by row, and media rows carry SHA-256 digests).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

PrefixCache::~PrefixCache() {
  for (auto& [id, e] : entries_) kv_.remove_sequence(e.seq);
}

void PrefixCache::chain_hashes(const std::string& method, int64_t chunk, std::span<const RowKey> rows,
                               std::vector<uint64_t>& out) {
  uint64_t h = mix(static_cast<uint64_t>(chunk));
  for (char c : method) h = mix(h ^ static_cast<uint8_t>(c));
  out.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    h = mix(h ^ rows[i].a);
    h = mix(h ^ rows[i].b);
    out[i] = h;
  }
}

PrefixCacheMethodStats& PrefixCache::method_stats(const std::string& method) {
  PrefixCacheMethodStats& s = stats_[method];
  s.method = method;
  return s;
}

void PrefixCache::count_lookup(const std::string& method, int64_t n_cached) {
  PrefixCacheMethodStats& s = method_stats(method);
  if (n_cached > 0) {
    ++s.hits;
    s.cached_tokens += n_cached;
  } else {
    ++s.misses;
  }
}

void PrefixCache::touch(int64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
}

void PrefixCache::erase(std::map<int64_t, Entry>::iterator it) {
  Entry& e = it->second;
  kv_.remove_sequence(e.seq);
  bytes_ -= e.bytes;
  if (auto o = owner_bytes_.find(e.owner); o != owner_bytes_.end() && (o->second -= e.bytes) == 0) owner_bytes_.erase(o);
  PrefixCacheMethodStats& s = method_stats(e.method);
  --s.entries;
  s.tokens -= static_cast<int64_t>(e.rows.size());
  s.bytes -= e.bytes;
  lru_.erase(e.lru);
  auto [lo, hi] = by_hash_.equal_range(e.hash);
  for (auto h = lo; h != hi; ++h)
    if (h->second == e.id) {
      by_hash_.erase(h);
      break;
    }
  auto lens = lengths_.find({e.method, e.chunk});
  lens->second.erase(lens->second.find(static_cast<int64_t>(e.rows.size())));
  if (lens->second.empty()) lengths_.erase(lens);
  entries_.erase(it);
}

void PrefixCache::evict(std::map<int64_t, Entry>::iterator it) {
  ++method_stats(it->second.method).evicted;
  if (evict_hook_) evict_hook_(it->second.seq, it->second.method, it->second.chunk, it->second.rows);
  erase(it);
}

bool PrefixCache::evict_lru(int64_t keep) {
  for (auto id = lru_.rbegin(); id != lru_.rend(); ++id) {
    if (*id == keep) continue;
    evict(entries_.find(*id));
    return true;
  }
  return false;
}

bool PrefixCache::make_owner_room(uint64_t owner, uint64_t need) {
  if (owner_cap_ == 0) return true;
  if (need > owner_cap_) return false;
  while (owner_bytes(owner) + need > owner_cap_) {
    auto id = std::find_if(lru_.rbegin(), lru_.rend(), [&](int64_t i) { return entries_.at(i).owner == owner; });
    if (id == lru_.rend()) return false;
    evict(entries_.find(*id));
  }
  return true;
}

uint64_t PrefixCache::evict_bytes(uint64_t bytes, int64_t keep) {
  const uint64_t before = bytes_;
  while (before - bytes_ < bytes && evict_lru(keep)) {
  }
  return before - bytes_;
}

bool PrefixCache::make_room(uint64_t need, uint64_t room) {
  const uint64_t cap = std::min(max_bytes_, room);
  if (need > cap) return false;
  while (bytes_ + need > cap && evict_lru()) {
  }
  return bytes_ + need <= cap;
}

bool PrefixCache::insert(SeqId src, const std::string& method, int64_t chunk, std::span<const RowKey> rows,
                         uint64_t room, int64_t replaces, uint64_t owner) {
  if (!enabled() || rows.empty() || kv_.n_tokens(src) != static_cast<int64_t>(rows.size())) return false;
  const int64_t n = static_cast<int64_t>(rows.size());
  Hit same = find(method, chunk, rows, n, [n](int64_t m) { return m == n; });
  if (same.id >= 0) return false;  // kept already (find touched it)
  if (auto old = entries_.find(replaces); old != entries_.end()) {
    const Entry& o = old->second;
    if (o.method == method && o.chunk == chunk && o.rows.size() < rows.size() &&
        std::equal(o.rows.begin(), o.rows.end(), rows.begin())) {
      ++method_stats(o.method).replaced;
      erase(old);
    }
  }
  // The copy allocates pages of the sizes src holds: exactly its bytes.
  if (!make_owner_room(owner, kv_.sequence_bytes(src)) || !make_room(kv_.sequence_bytes(src), room)) return false;
  Result<SeqId> seq = kv_.add_sequence(method);
  if (!seq.is_ok()) return false;
  if (Status st = kv_.copy_sequence(src, *seq); !st.is_ok()) {
    kv_.remove_sequence(*seq);
    return false;
  }
  add_entry(*seq, method, chunk, rows, owner);
  return true;
}

bool PrefixCache::adopt(SeqId seq, const std::string& method, int64_t chunk, std::span<const RowKey> rows,
                        uint64_t room, uint64_t owner) {
  if (!enabled() || rows.empty() || kv_.n_tokens(seq) != static_cast<int64_t>(rows.size()) ||
      kv_.sequence_method(seq) != method)
    return false;
  const int64_t n = static_cast<int64_t>(rows.size());
  if (find(method, chunk, rows, n, [n](int64_t m) { return m == n; }).id >= 0) return false;
  if (!make_owner_room(owner, kv_.sequence_bytes(seq)) || !make_room(kv_.sequence_bytes(seq), room)) return false;
  add_entry(seq, method, chunk, rows, owner);
  return true;
}

void PrefixCache::add_entry(SeqId seq, const std::string& method, int64_t chunk, std::span<const RowKey> rows,
                            uint64_t owner) {
  const int64_t n = static_cast<int64_t>(rows.size());
  Entry e;
  e.id = next_id_++;
  e.seq = seq;
  e.method = method;
  e.chunk = chunk;
  e.rows.assign(rows.begin(), rows.end());
  std::vector<uint64_t> h;
  chain_hashes(method, chunk, rows, h);
  e.hash = h.back();
  e.bytes = kv_.sequence_bytes(seq);
  e.owner = owner;
  owner_bytes_[owner] += e.bytes;
  lru_.push_front(e.id);
  e.lru = lru_.begin();
  by_hash_.emplace(e.hash, e.id);
  lengths_[{method, chunk}].insert(n);
  bytes_ += e.bytes;
  PrefixCacheMethodStats& s = method_stats(method);
  ++s.inserted;
  ++s.entries;
  s.tokens += n;
  s.bytes += e.bytes;
  entries_.emplace(e.id, std::move(e));
}

std::vector<PrefixCacheMethodStats> PrefixCache::stats() const {
  std::vector<PrefixCacheMethodStats> out;
  for (const auto& [name, s] : stats_) out.push_back(s);
  return out;
}

Status PrefixCache::check_invariants() const {
  auto broken = [](const std::string& what) { return Status(StatusCode::kInternal, "prefix cache: " + what); };
  uint64_t bytes = 0;
  std::map<std::string, PrefixCacheMethodStats> per;
  std::map<uint64_t, uint64_t> owners;
  size_t n_lengths = 0;
  for (const auto& [id, e] : entries_) {
    if (e.id != id) return broken("an entry's id differs from its key");
    if (kv_.n_tokens(e.seq) != static_cast<int64_t>(e.rows.size())) return broken("an entry's sequence lost tokens");
    if (kv_.sequence_bytes(e.seq) != e.bytes) return broken("an entry's bytes differ from its sequence's pages");
    if (kv_.sequence_method(e.seq) != e.method) return broken("an entry's sequence has another method");
    std::vector<uint64_t> h;
    chain_hashes(e.method, e.chunk, e.rows, h);
    if (h.back() != e.hash) return broken("an entry's hash differs from its rows'");
    bool indexed = false;
    auto [lo, hi] = by_hash_.equal_range(e.hash);
    for (auto it = lo; it != hi; ++it) indexed = indexed || it->second == id;
    if (!indexed) return broken("an entry is missing from the hash index");
    auto lens = lengths_.find({e.method, e.chunk});
    if (lens == lengths_.end() || !lens->second.count(static_cast<int64_t>(e.rows.size())))
      return broken("an entry's length is missing from the length index");
    bytes += e.bytes;
    owners[e.owner] += e.bytes;
    per[e.method].entries += 1;
    per[e.method].tokens += static_cast<int64_t>(e.rows.size());
    per[e.method].bytes += e.bytes;
  }
  for (const auto& [key, lens] : lengths_) n_lengths += lens.size();
  if (n_lengths != entries_.size()) return broken("the length index holds other entries");
  std::erase_if(owners, [](const auto& o) { return o.second == 0; });
  std::map<uint64_t, uint64_t> counted = owner_bytes_;
  std::erase_if(counted, [](const auto& o) { return o.second == 0; });
  if (owners != counted) return broken("the bytes per owner differ from its entries'");
  if (by_hash_.size() != entries_.size()) return broken("the hash index holds other entries");
  if (lru_.size() != entries_.size()) return broken("the LRU list holds other entries");
  for (int64_t id : lru_)
    if (!entries_.count(id)) return broken("the LRU list names a removed entry");
  if (bytes != bytes_) return broken("the byte count differs from the entries' sum");
  if (bytes_ > max_bytes_) return broken("over the cache budget");
  for (const auto& [name, s] : stats_) {
    const PrefixCacheMethodStats& want = per[name];
    if (s.entries != want.entries || s.tokens != want.tokens || s.bytes != want.bytes)
      return broken("the per-method counts differ from the entries (" + name + ")");
    if (s.inserted - s.evicted - s.replaced != s.entries)
      return broken("entries differ from inserted minus evicted and replaced (" + name + ")");
  }
  return Status::ok();
}

}  // namespace vlkv
