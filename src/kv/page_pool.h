// The KV cache's memory: fixed-size byte pages handed out under a byte budget.
// Pages are allocated from the OS lazily (first use) and recycled through a free
// list; the pool never knows what a page holds (codecs and methods do).
#pragma once

#include <cstdint>
#include <map>
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
  // Pages of page_bytes by default (budget_bytes / page_bytes of them at most); any other
  // size may be asked for (allocate(bytes)): pages of every size share the byte budget.
  // page_bytes must be a multiple of 64; every page starts 64-byte aligned.
  PagePool(uint64_t budget_bytes, uint32_t page_bytes);
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // OutOfMemory "KV budget of 512 MiB exhausted" when the page does not fit next to the
  // pages in use; the caller (the cache) appends the token and what to do about it.
  Result<PageId> allocate() { return allocate(page_bytes_); }
  // A page of `bytes` (> 0). Freed pages are recycled by size; memory the OS gave for freed
  // pages of other sizes is returned to it when a new size would exceed the budget, so the
  // memory taken from the OS never exceeds the budget either.
  Result<PageId> allocate(uint32_t bytes);
  void free(PageId page);

  // Page contents: size_of(page) bytes, 64-byte aligned. Valid from allocate() to free().
  // Safe to call concurrently with allocate/free of other pages.
  uint8_t* data(PageId page) const { return entry(page).data; }
  uint32_t size_of(PageId page) const { return entry(page).size; }

  uint32_t page_bytes() const { return page_bytes_; }  // the default page size
  uint64_t budget_bytes() const { return budget_bytes_; }
  int64_t max_pages() const { return max_pages_; }     // of the default size
  int64_t pages_in_use() const;
  // Exact: the bytes of the pages handed out (what the budget limits).
  uint64_t bytes_in_use() const;
  // Bytes obtained from the OS so far (in use + recycled), <= budget.
  uint64_t bytes_reserved() const;

 private:
  struct Entry {
    uint8_t* data = nullptr;  // null: no memory (id free for reuse)
    uint32_t size = 0;
    bool in_use = false;
  };
  static constexpr int64_t kChunk = 4096;  // directory entries per chunk
  const Entry& entry(PageId page) const { return chunks_[page / kChunk][page % kChunk]; }
  Entry& entry(PageId page) { return chunks_[page / kChunk][page % kChunk]; }
  // Returns one recycled page of another size to the OS (lock held); false if none.
  bool release_one_free_page();

  uint64_t budget_bytes_;
  uint32_t page_bytes_;
  int64_t max_pages_;
  // Page directory in chunks of kChunk entries: the chunk table is sized once (for pages of
  // 64 bytes filling the budget) so data() never races a reallocation; chunks are created
  // on first use and never move.
  std::unique_ptr<std::unique_ptr<Entry[]>[]> chunks_;
  int64_t n_chunk_slots_ = 0;
  mutable std::mutex mutex_;
  int64_t n_ids_ = 0;                                   // ids handed out so far (0 .. n_ids_-1 exist)
  std::vector<PageId> free_ids_;                        // ids without memory
  std::map<uint32_t, std::vector<PageId>> free_pages_;  // recycled pages with memory, by size
  int64_t n_in_use_ = 0;
  uint64_t bytes_in_use_ = 0, bytes_reserved_ = 0;
};

// "512 MiB", "1.5 GiB", "3000 bytes": budgets in messages.
std::string format_bytes(uint64_t bytes);

}  // namespace vlkv
