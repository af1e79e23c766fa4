#include "kv/page_pool.h"

#include <algorithm>
#include <cstdio>
#include <new>

#include "base/check.h"

namespace vlkv {

static constexpr std::align_val_t kPageAlign{64};

PagePool::PagePool(uint64_t budget_bytes, uint32_t page_bytes)
    : budget_bytes_(budget_bytes), page_bytes_(page_bytes) {
  VLKV_CHECK_MSG(page_bytes >= 64 && page_bytes % 64 == 0, "page_bytes must be a positive multiple of 64");
  const uint64_t n = budget_bytes / page_bytes;
  VLKV_CHECK_MSG(n < (1ull << 31), "too many pages for PageId; raise page_bytes");
  max_pages_ = static_cast<int64_t>(n);
  // Pages of at least 64 bytes: at most budget / 64 exist at once (ids are reused).
  const uint64_t max_ids = std::min<uint64_t>(budget_bytes / 64 + 1, (1ull << 31) - 1);
  n_chunk_slots_ = static_cast<int64_t>((max_ids + kChunk - 1) / kChunk);
  chunks_ = std::make_unique<std::unique_ptr<Entry[]>[]>(static_cast<size_t>(n_chunk_slots_));
}

PagePool::~PagePool() {
  for (int64_t i = 0; i < n_ids_; ++i)
    if (entry(static_cast<PageId>(i)).data) ::operator delete[](entry(static_cast<PageId>(i)).data, kPageAlign);
}

bool PagePool::release_one_free_page() {
  for (auto it = free_pages_.rbegin(); it != free_pages_.rend(); ++it) {  // largest first
    if (it->second.empty()) continue;
    const PageId id = it->second.back();
    it->second.pop_back();
    Entry& e = entry(id);
    ::operator delete[](e.data, kPageAlign);
    bytes_reserved_ -= e.size;
    e = Entry{};
    free_ids_.push_back(id);
    return true;
  }
  return false;
}

Result<PageId> PagePool::allocate(uint32_t bytes) {
  VLKV_CHECK_MSG(bytes > 0, "a page of 0 bytes");
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes_in_use_ + bytes > budget_bytes_) return out_of_memory("KV budget of " + format_bytes(budget_bytes_) + " exhausted");
  PageId id;
  auto recycled = free_pages_.find(bytes);
  if (recycled != free_pages_.end() && !recycled->second.empty()) {
    id = recycled->second.back();
    recycled->second.pop_back();
  } else {
    while (bytes_reserved_ + bytes > budget_bytes_ && release_one_free_page()) {
    }
    if (!free_ids_.empty()) {
      id = free_ids_.back();
      free_ids_.pop_back();
    } else {
      VLKV_CHECK_MSG(n_ids_ < n_chunk_slots_ * kChunk, "page directory full");
      id = static_cast<PageId>(n_ids_++);
      auto& chunk = chunks_[id / kChunk];
      if (!chunk) chunk = std::make_unique<Entry[]>(kChunk);
    }
    Entry& e = entry(id);
    e.data = static_cast<uint8_t*>(::operator new[](bytes, kPageAlign, std::nothrow));
    if (!e.data) {
      free_ids_.push_back(id);
      return out_of_memory("the system refused memory for a KV page (" + format_bytes(bytes_reserved_) + " held of a " +
                           format_bytes(budget_bytes_) + " KV budget)");
    }
    e.size = bytes;
    bytes_reserved_ += bytes;
  }
  Entry& e = entry(id);
  e.in_use = true;
  ++n_in_use_;
  bytes_in_use_ += bytes;
  return id;
}

void PagePool::free(PageId page) {
  std::lock_guard<std::mutex> lock(mutex_);
  VLKV_CHECK_MSG(page >= 0 && page < n_ids_ && entry(page).in_use, "freeing a page that is not in use");
  Entry& e = entry(page);
  e.in_use = false;
  --n_in_use_;
  bytes_in_use_ -= e.size;
  free_pages_[e.size].push_back(page);
}

int64_t PagePool::pages_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return n_in_use_;
}

uint64_t PagePool::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_in_use_;
}

uint64_t PagePool::bytes_reserved() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_reserved_;
}

std::string format_bytes(uint64_t bytes) {
  char buf[64];
  const uint64_t kMiB = 1ull << 20, kGiB = 1ull << 30, kKiB = 1ull << 10;
  if (bytes >= kGiB && bytes % (kGiB / 4) == 0) {
    std::snprintf(buf, sizeof buf, "%g GiB", static_cast<double>(bytes) / kGiB);
  } else if (bytes >= kMiB && bytes % (kMiB / 4) == 0) {
    std::snprintf(buf, sizeof buf, "%g MiB", static_cast<double>(bytes) / kMiB);
  } else if (bytes >= kKiB && bytes % kKiB == 0) {
    std::snprintf(buf, sizeof buf, "%llu KiB", static_cast<unsigned long long>(bytes / kKiB));
  } else {
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

}  // namespace vlkv
