#include "base/thread_pool.h"

#include <atomic>
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

}  // namespace
}  // namespace vlkv
