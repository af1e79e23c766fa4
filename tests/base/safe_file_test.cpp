// src/base/safe_file.h: reads take regular files only, without blocking on what the path is;
// writes replace a regular file through a fresh temporary, and refuse anything else untouched.
#include "base/safe_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace vlkv {
namespace {

std::string tmp(const std::string& name) {
  return ::testing::TempDir() + "vlkv_safe_file_" + std::to_string(::getpid()) + "_" + name;
}
std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(SafeFile, ReadsRegularFilesAndLinksToThemOnly) {
  const std::string file = tmp("r.bin"), link = tmp("r.link"), fifo = tmp("r.fifo");
  ASSERT_TRUE(write_file_atomically(file, "hello").is_ok());
  std::remove(link.c_str());
  ASSERT_EQ(::symlink(file.c_str(), link.c_str()), 0);
  for (const std::string& p : {file, link}) {
    Result<RegularFile> f = open_regular_file(p);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    EXPECT_EQ(f->size, 5u);
    char buf[5];
    ASSERT_TRUE(read_exactly(*f, 0, buf, 5, p).is_ok());
    EXPECT_EQ(std::string(buf, 5), "hello");
    EXPECT_FALSE(read_exactly(*f, 1, buf, 5, p).is_ok());  // past the end
  }
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Result<RegularFile> f = open_regular_file(fifo);  // no writer: a blocking open would wait forever
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().message(), fifo + ": not a regular file (a FIFO)");
  f = open_regular_file("/dev/zero");
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("a character device"), std::string::npos) << f.status().message();
  f = open_regular_file(::testing::TempDir());
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("a folder"), std::string::npos) << f.status().message();
  for (const std::string& p : {file, link, fifo}) std::remove(p.c_str());
}

TEST(SafeFile, WritesRefuseWhatIsNotARegularFileAndLeaveItAlone) {
  for (const char* device : {"/dev/full", "/dev/null"}) {
    SCOPED_TRACE(device);
    struct stat before;
    if (::stat(device, &before) != 0 || !S_ISCHR(before.st_mode)) GTEST_SKIP() << device << " is no device here";
    for (Status st : {check_writable_file(device), write_file_atomically(device, "x")}) {
      ASSERT_FALSE(st.is_ok());
      EXPECT_NE(st.message().find("it is a character device, not a regular file"), std::string::npos) << st.message();
    }
    struct stat after;
    ASSERT_EQ(::lstat(device, &after), 0);
    EXPECT_TRUE(S_ISCHR(after.st_mode));
    EXPECT_EQ(after.st_rdev, before.st_rdev);
  }
  Status st = write_file_atomically(::testing::TempDir(), "x");
  EXPECT_NE(st.message().find("it is a folder"), std::string::npos) << st.message();
  st = check_writable_file(tmp("no_such_folder") + "/x");
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("cannot write"), std::string::npos) << st.message();
  EXPECT_FALSE(check_writable_file("").is_ok());
}

// A replaced file keeps its permissions; a new one gets 0666 less the umask (mkstemp's 0600
// would hide a saved file from its group); no temporary is left beside it.
TEST(SafeFile, ReplacesAtomicallyKeepingPermissions) {
  const std::string file = tmp("w.bin");
  std::remove(file.c_str());
  ASSERT_TRUE(check_writable_file(file).is_ok());
  ASSERT_TRUE(write_file_atomically(file, "one").is_ok());
  struct stat sb;
  ASSERT_EQ(::stat(file.c_str(), &sb), 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(sb.st_mode & 0777, 0666 & ~mask);
  ASSERT_EQ(::chmod(file.c_str(), 0640), 0);
  ASSERT_TRUE(write_file_atomically(file, "two, longer").is_ok());
  EXPECT_EQ(read_all(file), "two, longer");
  ASSERT_EQ(::stat(file.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0640u);
  ASSERT_TRUE(write_file_atomically(file, "").is_ok());
  EXPECT_EQ(read_all(file), "");
  std::remove(file.c_str());
}

}  // namespace
}  // namespace vlkv
