#include "kv/page_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

namespace vlkv {
namespace {

TEST(PagePool, AllocatesUnderBudgetWithExactAccounting) {
  PagePool pool(10 * 4096 + 100, 4096);  // the partial page of budget is unusable
  EXPECT_EQ(pool.max_pages(), 10);
  EXPECT_EQ(pool.bytes_in_use(), 0u);
  EXPECT_EQ(pool.bytes_reserved(), 0u);  // lazy: nothing taken from the OS yet
  std::vector<PageId> pages;
  for (int i = 0; i < 10; ++i) {
    Result<PageId> p = pool.allocate();
    ASSERT_TRUE(p.is_ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(pool.data(*p)) % 64, 0u);
    std::memset(pool.data(*p), i, 4096);
    pages.push_back(*p);
    EXPECT_EQ(pool.bytes_in_use(), 4096u * (i + 1));
  }
  EXPECT_EQ(std::set<PageId>(pages.begin(), pages.end()).size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(pool.data(pages[i])[4095], i);  // pages do not overlap
  pool.free(pages[3]);
  pool.free(pages[7]);
  EXPECT_EQ(pool.bytes_in_use(), 8u * 4096);
  EXPECT_EQ(pool.bytes_reserved(), 10u * 4096);
  // Freed pages are recycled, not re-obtained.
  ASSERT_TRUE(pool.allocate().is_ok());
  ASSERT_TRUE(pool.allocate().is_ok());
  EXPECT_EQ(pool.bytes_reserved(), 10u * 4096);
  EXPECT_EQ(pool.bytes_in_use(), 10u * 4096);
}

TEST(PagePool, ExhaustionIsAStatusWithTheBudget) {
  PagePool pool(512ull << 20, 64 << 20);  // 8 pages of 64 MiB (lazy: only touched pages cost memory)
  PagePool small(3 * 1024, 1024);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(small.allocate().is_ok());
  Result<PageId> p = small.allocate();
  ASSERT_FALSE(p.is_ok());
  EXPECT_EQ(p.status().code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(p.status().message(), "KV budget of 3 KiB exhausted");
  EXPECT_EQ(small.bytes_in_use(), 3u * 1024);
  EXPECT_EQ(format_bytes(512ull << 20), "512 MiB");
  EXPECT_EQ(format_bytes(3ull << 30), "3 GiB");
  EXPECT_EQ(format_bytes(1000), "1000 bytes");
  EXPECT_EQ(pool.max_pages(), 8);
}

TEST(PagePool, ZeroBudgetHasNoPages) {
  PagePool pool(0, 4096);
  Result<PageId> p = pool.allocate();
  ASSERT_FALSE(p.is_ok());
  EXPECT_EQ(p.status().code(), StatusCode::kOutOfMemory);
}

// Pages of several sizes share the budget: exact bytes in use, recycling by size, and the
// memory kept for freed pages of one size is returned when another size needs the room.
TEST(PagePool, SizedPagesShareTheBudget) {
  PagePool pool(10 * 1024, 1024);
  const PageId a = pool.allocate(3000).value(), b = pool.allocate(1024).value(), c = pool.allocate(64).value();
  EXPECT_EQ(pool.size_of(a), 3000u);
  EXPECT_EQ(pool.bytes_in_use(), 3000u + 1024u + 64u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pool.data(a)) % 64, 0u);
  std::memset(pool.data(a), 1, 3000);
  std::memset(pool.data(b), 2, 1024);
  EXPECT_EQ(pool.data(a)[2999], 1);
  EXPECT_EQ(pool.allocate(7000).status().code(), StatusCode::kOutOfMemory);  // 4088 in use + 7000 > 10240
  pool.free(a);
  EXPECT_EQ(pool.bytes_in_use(), 1024u + 64u);
  EXPECT_EQ(pool.bytes_reserved(), 3000u + 1024u + 64u);
  const PageId d = pool.allocate(3000).value();  // recycled
  EXPECT_EQ(pool.bytes_reserved(), 3000u + 1024u + 64u);
  pool.free(d);
  // 9000 fits next to the 1088 in use only if the freed 3000-byte page goes back to the OS.
  const PageId e = pool.allocate(9000).value();
  EXPECT_LE(pool.bytes_reserved(), 10u * 1024);
  EXPECT_EQ(pool.bytes_in_use(), 9000u + 1024u + 64u);
  for (PageId p : {b, c, e}) pool.free(p);
  EXPECT_EQ(pool.bytes_in_use(), 0u);
  EXPECT_EQ(pool.pages_in_use(), 0);
}

}  // namespace
}  // namespace vlkv
