#include "kv/page_pool.h"

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
  pages_ = std::make_unique<uint8_t*[]>(static_cast<size_t>(max_pages_) + 1);
}

PagePool::~PagePool() {
  for (int64_t i = 0; i < n_created_; ++i) ::operator delete[](pages_[i], kPageAlign);
}

Result<PageId> PagePool::allocate() {
  std::lock_guard<std::mutex> lock(mutex_);
  PageId id;
  if (!free_list_.empty()) {
    id = free_list_.back();
    free_list_.pop_back();
  } else if (n_created_ < max_pages_) {
    id = static_cast<PageId>(n_created_);
    pages_[id] = static_cast<uint8_t*>(::operator new[](page_bytes_, kPageAlign, std::nothrow));
    if (!pages_[id]) return out_of_memory("the system refused memory for a KV page (" + format_bytes(static_cast<uint64_t>(n_created_) * page_bytes_) +
                                          " held of a " + format_bytes(budget_bytes_) + " KV budget)");
    ++n_created_;
    in_use_.push_back(0);
  } else {
    return out_of_memory("KV budget of " + format_bytes(budget_bytes_) + " exhausted");
  }
  in_use_[id] = 1;
  ++n_in_use_;
  return id;
}

void PagePool::free(PageId page) {
  std::lock_guard<std::mutex> lock(mutex_);
  VLKV_CHECK_MSG(page >= 0 && page < n_created_ && in_use_[page], "freeing a page that is not in use");
  in_use_[page] = 0;
  --n_in_use_;
  free_list_.push_back(page);
}

int64_t PagePool::pages_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return n_in_use_;
}

uint64_t PagePool::bytes_reserved() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<uint64_t>(n_created_) * page_bytes_;
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
