// DirStore (vlkv serve --cache-dir): values are written by its writer thread, found by get()
// while still queued, on disk after flush(), all written before the store is destroyed, and
// found again by a store opened later on the same directory. The folder is untrusted: a FIFO
// or a link put in place of an entry is not opened or followed (and holds up no other
// lookup), a write never goes through a link planted at its temporary or target name, a
// folder the store did not make is refused unless empty, and no file but its own entries is
// ever deleted.
#include "server/dir_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
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

std::string entry_path(const std::string& dir, int i) { return dir + "/vlkv-" + dir_store_name(key_of(i)) + ".kv"; }

std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "vlkv_dir_store_" + name + "_" + std::to_string(getpid());
  fs::remove_all(dir);
  return dir;
}

void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

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
    EXPECT_EQ(read_file(entry_path(dir, 3)), std::string(1003, '3'));
    // Queued and not flushed: the destructor writes them.
    store.put(key_of(5), std::string(500, 'x'));
    store.put(key_of(6), std::string(600, 'y'));
  }
  for (const fs::directory_entry& d : fs::directory_iterator(dir))
    EXPECT_TRUE(d.path().extension() == ".kv" || d.path().filename() == DirStore::kMarker) << d.path();
  auto again = DirStore::open(o);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ((*again)->get(key_of(6)).value_or(""), std::string(600, 'y'));
  EXPECT_EQ((*again)->get(key_of(0)).value_or(""), std::string(1000, '0'));
  EXPECT_EQ((*again)->bytes(), 5u * 1000 + 10 + 500 + 600);
  again->reset();
  fs::remove_all(dir);
}

// A lookup of an entry whose file was replaced by a FIFO (or a link, or a file of another
// size) misses at once, and other lookups meanwhile are answered.
TEST(DirStore, OnlyReadsTheRegularFileItWrote) {
  const std::string dir = fresh_dir("fifo");
  DirStoreOptions o;
  o.dir = dir;
  auto s = DirStore::open(o);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  DirStore& store = **s;
  for (int i = 0; i < 4; ++i) store.put(key_of(i), std::string(1000, static_cast<char>('0' + i)));
  store.flush();
  write(dir + "/elsewhere", std::string(1000, 'e'));
  fs::remove(entry_path(dir, 0));
  ASSERT_EQ(::mkfifo(entry_path(dir, 0).c_str(), 0600), 0);
  fs::remove(entry_path(dir, 1));
  fs::create_symlink(dir + "/elsewhere", entry_path(dir, 1));
  write(entry_path(dir, 2), std::string(5000, 'g'));  // grown: not the size written
  const auto t0 = std::chrono::steady_clock::now();
  auto fifo = std::async(std::launch::async, [&] { return store.get(key_of(0)); });
  EXPECT_EQ(store.get(key_of(3)).value_or(""), std::string(1000, '3'));
  ASSERT_EQ(fifo.wait_for(std::chrono::seconds(2)), std::future_status::ready) << "blocked opening a FIFO";
  EXPECT_FALSE(fifo.get().has_value());
  EXPECT_FALSE(store.get(key_of(1)).has_value());
  EXPECT_FALSE(store.get(key_of(2)).has_value());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  EXPECT_EQ(store.stats().hits, 1);
  EXPECT_EQ(read_file(dir + "/elsewhere"), std::string(1000, 'e'));
  s->reset();
  fs::remove_all(dir);
}

// Links planted at the names a write uses (the old fixed temporary name, the entry's own
// name): the files they point to are never written.
TEST(DirStore, WritesNeverFollowALink) {
  const std::string dir = fresh_dir("links");
  DirStoreOptions o;
  o.dir = dir;
  auto s = DirStore::open(o);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  const std::string victim = fresh_dir("victim");
  write(victim, "precious");
  const std::string hex = dir_store_name(key_of(0));
  for (const std::string& name : {hex + ".kv.tmp", hex + ".kv", "vlkv-" + hex + ".kv.tmp", "vlkv-" + hex + ".kv"})
    fs::create_symlink(victim, dir + "/" + name);
  (*s)->put(key_of(0), std::string(1000, 'w'));
  (*s)->flush();
  EXPECT_EQ(read_file(victim), "precious");
  EXPECT_TRUE(fs::is_symlink(entry_path(dir, 0)));  // not a regular file: not replaced, the entry dropped
  EXPECT_EQ((*s)->stats().writes, 0);
  EXPECT_FALSE((*s)->get(key_of(0)).has_value());
  s->reset();
  fs::remove_all(dir);
  fs::remove(victim);
}

// A folder with files in it and no marker is refused, its files untouched. In its own folder,
// the store deletes only its own entries and temporaries, whatever the cap.
TEST(DirStore, NeverDeletesFilesItDidNotMake) {
  const std::string dir = fresh_dir("user");
  fs::create_directories(dir);
  const std::vector<std::string> users = {"1.kv", "f16.kv", "abc.kv.tmp", "f16.kv.tmp", "vlkv-zz.kv", "notes.txt"};
  for (const std::string& f : users) write(dir + "/" + f, std::string(100, 'u'));
  DirStoreOptions o;
  o.dir = dir;
  o.max_total_bytes = 10;  // everything over the cap
  auto refused = DirStore::open(o);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("not made by vlkv serve"), std::string::npos) << refused.status().message();
  for (const std::string& f : users) EXPECT_EQ(read_file(dir + "/" + f), std::string(100, 'u')) << f;

  // The same files in a folder the store made: still left alone.
  fs::remove_all(dir);
  {
    o.max_total_bytes = 1 << 20;
    auto s = DirStore::open(o);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    (*s)->put(key_of(0), std::string(1000, 'o'));
  }
  for (const std::string& f : users) write(dir + "/" + f, std::string(100, 'u'));
  write(dir + "/vlkv-" + dir_store_name(key_of(1)) + ".kv.tmp.Ab12Cd", "half");  // ours, half-written
  o.max_total_bytes = 10;
  auto s = DirStore::open(o);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  for (const std::string& f : users) EXPECT_EQ(read_file(dir + "/" + f), std::string(100, 'u')) << f;
  EXPECT_FALSE(fs::exists(entry_path(dir, 0)));  // its own entry, over the cap: trimmed
  EXPECT_FALSE(fs::exists(dir + "/vlkv-" + dir_store_name(key_of(1)) + ".kv.tmp.Ab12Cd"));
  EXPECT_TRUE(fs::exists(dir + "/" + DirStore::kMarker));
  s->reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vlkv::server
