// Software prefetch of KV pages ahead of a kernel's reads. A stream's 2 KiB pages lie
// anywhere in the pool, so the hardware prefetcher loses the stream at every page and
// each page would wait on DRAM (decode attention profiles: most samples on the first
// loads of a page). ISA-free (__builtin_prefetch): every tier's kernel loops use it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kv/codec.h"

namespace vlkv {

inline void prefetch_lines(const uint8_t* p, int64_t l0, int64_t l1) {  // 64-byte lines [l0, l1)
  for (int64_t l = l0; l < l1; ++l) __builtin_prefetch(p + 64 * l, 0, 3);
}
inline void prefetch_bytes(const uint8_t* p, int64_t n) { prefetch_lines(p, 0, (n + 63) / 64); }

// Walks a view's blocks in order, keeping the prefetches `ahead` blocks in front of the
// kernel: at(b) (the kernel is about to read block b) prefetches every block up to b + ahead
// not prefetched yet, page run by page run.
class ViewPrefetcher {
 public:
  ViewPrefetcher(const SegmentView& s, int64_t ahead) : s_(s), ahead_(ahead) {}
  void at(int64_t b) {
    const int64_t want = std::min(s_.n_blocks(), b + ahead_);
    while (next_ < want) {
      const int64_t n = std::min(s_.contiguous_blocks(next_), want - next_);
      prefetch_bytes(s_.block(next_), n * s_.block_bytes);
      next_ += n;
    }
  }

 private:
  const SegmentView& s_;
  int64_t ahead_;
  int64_t next_ = 0;
};

}  // namespace vlkv
