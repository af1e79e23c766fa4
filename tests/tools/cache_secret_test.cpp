// load_or_create_cache_secret (vlkv serve --cache-secret-file): an absent file is created
// with 32 random bytes, mode 0600, and read back the same; a file others may read or write, a
// link, a FIFO or one too short is refused with an error that says how to make one.
#include "server/cache_secret.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace vlkv::server {
namespace {
namespace fs = std::filesystem;

TEST(CacheSecret, CreatedOnceThenLoaded) {
  const std::string dir = ::testing::TempDir() + "vlkv_secret_" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = dir + "/secret";
  Result<CacheSecret> made = load_or_create_cache_secret(path);
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  EXPECT_TRUE(made->created);
  EXPECT_EQ(made->bytes.size(), 32u);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Result<CacheSecret> again = load_or_create_cache_secret(path);
  ASSERT_TRUE(again.is_ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->bytes, made->bytes);

  ::chmod(path.c_str(), 0644);
  Result<CacheSecret> readable = load_or_create_cache_secret(path);
  ASSERT_FALSE(readable.is_ok());
  EXPECT_NE(readable.status().message().find("readable or writable by others"), std::string::npos);
  EXPECT_NE(readable.status().message().find("head -c 32 /dev/urandom"), std::string::npos);
  ::chmod(path.c_str(), 0600);

  const std::string link = dir + "/link";
  fs::create_symlink(path, link);
  EXPECT_FALSE(load_or_create_cache_secret(link).is_ok());
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(load_or_create_cache_secret(fifo).is_ok());  // and returns: opened without blocking
  const std::string short_file = dir + "/short";
  std::ofstream(short_file) << "abc";
  ::chmod(short_file.c_str(), 0600);
  EXPECT_FALSE(load_or_create_cache_secret(short_file).is_ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vlkv::server
