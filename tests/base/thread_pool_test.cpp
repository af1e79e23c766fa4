#include "base/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>
#include <gtest/gtest.h>
#include <vector>

namespace vlkv {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      for (int rep = 0; rep < 5; ++rep) {
        pool.parallel_for(n, [&](int64_t b, int64_t e, int t) {
          EXPECT_GE(t, 0);
          EXPECT_LT(t, threads);
          for (int64_t i = b; i < e; ++i) hits[i]++;
        });
      }
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 5) << threads << " " << n << " " << i;
    }
  }
}

TEST(ThreadPool, ChunkedCoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 1000, 200000}) {
      for (int64_t grain : {1, 3, 64}) {
        std::vector<std::atomic<int>> hits(n);
        for (int rep = 0; rep < 3; ++rep) {
          pool.parallel_for_chunked(n, grain, [&](int64_t b, int64_t e, int t) {
            EXPECT_GE(t, 0);
            EXPECT_LT(t, threads);
            if (threads > 1) {
              EXPECT_LE(e - b, std::max<int64_t>(grain, (n + 0xfffe) / 0xffff));
            }
            for (int64_t i = b; i < e; ++i) hits[i]++;
          });
        }
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 3) << threads << " " << n << " " << i;
      }
    }
  }
}

// Guided chunks: every index once, chunk starts on `align`, chunks no shorter than min_grain
// (but the last) and never growing: the first is the largest.
TEST(ThreadPool, GuidedCoversEveryIndexInShrinkingAlignedChunks) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 1000, 5632, 200000}) {
      for (int64_t min_grain : {1, 16, 500}) {
        std::vector<std::atomic<int>> hits(n);
        std::mutex m;
        std::vector<std::pair<int64_t, int64_t>> chunks;
        pool.parallel_for_guided(n, min_grain, 8, [&](int64_t b, int64_t e, int t) {
          EXPECT_GE(t, 0);
          EXPECT_LT(t, threads);
          for (int64_t i = b; i < e; ++i) hits[i]++;
          std::lock_guard<std::mutex> lock(m);
          chunks.emplace_back(b, e);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << n << " " << i;
        if (threads == 1 || n == 0) continue;
        std::sort(chunks.begin(), chunks.end());
        for (size_t c = 0; c < chunks.size(); ++c) {
          const int64_t len = chunks[c].second - chunks[c].first;
          EXPECT_EQ(chunks[c].first % 8, 0);
          if (chunks[c].second == n) continue;  // the last may be short
          EXPECT_GE(len, min_grain);
          if (c > 0) {
            EXPECT_LE(len, chunks[c - 1].second - chunks[c - 1].first);
          }
        }
        if (n >= 5632 && min_grain == 16) {
          EXPECT_GT(chunks.size(), 4u * threads);  // shrinking chunks, not n / (4 threads) equal ones
        }
      }
    }
  }
}

// No two concurrent calls share a thread index, so per-thread scratch is safe.
TEST(ThreadPool, ThreadIndexIsExclusive) {
  for (int threads : {2, 4}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> in_use(threads);
    auto body = [&](int64_t, int64_t, int t) {
      EXPECT_EQ(in_use[t].fetch_add(1), 0);
      std::atomic<int> work{0};
      for (int i = 0; i < 2000; ++i) work.fetch_add(1, std::memory_order_relaxed);
      in_use[t].fetch_sub(1);
    };
    for (int rep = 0; rep < 200; ++rep) {
      pool.parallel_for(threads * 3, body);
      pool.parallel_for_chunked(100, 1, body);
    }
  }
}

// Back-to-back short jobs (decode issues hundreds per token): none is lost or run twice.
TEST(ThreadPool, ManyShortJobs) {
  ThreadPool pool(2);
  int64_t total = 0;
  std::vector<int64_t> part(2);
  for (int rep = 0; rep < 20000; ++rep) {
    std::atomic<int64_t> sum{0};
    pool.parallel_for_chunked(4, 1, [&](int64_t b, int64_t e, int) { sum += e - b; });
    pool.parallel_for(2, [&](int64_t b, int64_t e, int) { sum += e - b; });
    total += sum.load();
  }
  EXPECT_EQ(total, 20000 * 6);
}

}  // namespace
}  // namespace vlkv
