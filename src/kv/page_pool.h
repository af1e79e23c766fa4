// The KV cache's memory: fixed-size byte pages handed out under a byte budget.
// Pages are allocated from the OS lazily (first use) and recycled through a free
// list; the pool never knows what a page holds (codecs and methods do).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vlkv/status.h"

namespace vlkv {

using PageId = int32_t;
inline constexpr PageId kNoPage = -1;

class PagePool {
 public:
  // budget_bytes / page_bytes pages at most (rounded down). page_bytes must be a
  // multiple of 64 (pages are 64-byte aligned for SIMD loads).
  PagePool(uint64_t budget_bytes, uint32_t page_bytes);
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // OutOfMemory "KV budget of 512 MiB exhausted" when every page is in use; the
  // caller (the cache) appends the token and what to do about it.
  Result<PageId> allocate();
  void free(PageId page);

  // Page contents: page_bytes bytes, 64-byte aligned. Valid from allocate() to free().
  // Safe to call concurrently with allocate/free of other pages.
  uint8_t* data(PageId page) const { return pages_[static_cast<size_t>(page)]; }

  uint32_t page_bytes() const { return page_bytes_; }
  uint64_t budget_bytes() const { return budget_bytes_; }
  int64_t max_pages() const { return max_pages_; }
  int64_t pages_in_use() const;
  // Exact: pages handed out * page_bytes (what the budget limits).
  uint64_t bytes_in_use() const { return static_cast<uint64_t>(pages_in_use()) * page_bytes_; }
  // Bytes obtained from the OS so far (in use + recycled), <= budget.
  uint64_t bytes_reserved() const;

 private:
  uint64_t budget_bytes_;
  uint32_t page_bytes_;
  int64_t max_pages_;
  // Page directory: [max_pages] pointers, sized once so data() never races a
  // reallocation; entries past n_created_ are null.
  std::unique_ptr<uint8_t*[]> pages_;
  mutable std::mutex mutex_;
  int64_t n_created_ = 0;
  std::vector<PageId> free_list_;
  std::vector<uint8_t> in_use_;  // [n_created_] 1 while handed out (catches double free)
  int64_t n_in_use_ = 0;
};

// "512 MiB", "1.5 GiB", "3000 bytes": budgets in messages.
std::string format_bytes(uint64_t bytes);

}  // namespace vlkv
