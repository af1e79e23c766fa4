// DirStore (vlkv serve --cache-dir): values are written by its writer thread, found by get()
// while still queued, on disk after flush(), all written before the store is destroyed, and
// found again by a store opened later on the same directory.
#include "server/dir_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace vlkv::server {
namespace {
namespace fs = std::filesystem;

std::string key_of(int i) { return "vlkv:prefix:" + std::string(31, 'a') + std::to_string(i % 10); }

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(DirStore, WritesOnItsOwnThreadAndFindsQueuedValues) {
  const std::string dir = ::testing::TempDir() + "vlkv_dir_store_" + std::to_string(getpid());
  fs::remove_all(dir);
  DirStoreOptions o;
  o.dir = dir;
  o.max_queued_bytes = 1 << 20;
  {
    auto s = DirStore::open(o);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    DirStore& store = **s;
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(store.wants(key_of(i), 1000));
      store.put(key_of(i), std::string(1000 + i, static_cast<char>('0' + i)));
      EXPECT_FALSE(store.wants(key_of(i), 1000));  // queued or written: not wanted twice
      const std::optional<std::string> v = store.get(key_of(i));  // queued or on disk: found either way
      ASSERT_TRUE(v.has_value()) << i;
      EXPECT_EQ(*v, std::string(1000 + i, static_cast<char>('0' + i)));
    }
    store.put("not a content key", "x");
    store.put(key_of(7), std::string(2 << 20, 'q'));  // past the queue's cap: dropped, not queued
    EXPECT_FALSE(store.get(key_of(7)).has_value());
    store.flush();
    const PrefixStoreStats st = store.stats();
    EXPECT_EQ(st.writes, 5);
    EXPECT_EQ(st.dropped, 2);
    EXPECT_EQ(st.hits, 5);
    EXPECT_EQ(store.bytes(), 5u * 1000 + 0 + 1 + 2 + 3 + 4);
    EXPECT_EQ(read_file(dir + "/" + dir_store_name(key_of(3)) + ".kv"), std::string(1003, '3'));
    // Queued and not flushed: the destructor writes them.
    store.put(key_of(5), std::string(500, 'x'));
    store.put(key_of(6), std::string(600, 'y'));
  }
  for (const fs::directory_entry& d : fs::directory_iterator(dir)) EXPECT_EQ(d.path().extension(), ".kv") << d.path();
  auto again = DirStore::open(o);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ((*again)->get(key_of(6)).value_or(""), std::string(600, 'y'));
  EXPECT_EQ((*again)->get(key_of(0)).value_or(""), std::string(1000, '0'));
  EXPECT_EQ((*again)->bytes(), 5u * 1000 + 10 + 500 + 600);
  again->reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vlkv::server
