// KvFileWriter (engine/kv_file.h): a KV file written section by section, the large ones streamed,
// is byte for byte the image build_kv_file makes of the same sections, and a write that fails
// or stops short leaves the target as it was and no temporary beside it.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "engine/kv_file.h"

namespace vlkv {
namespace {

std::string fresh_dir() {
  std::string d = ::testing::TempDir() + "vlkv_kv_writer_" + std::to_string(::getpid()) + "_" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name();
  ::mkdir(d.c_str(), 0700);
  return d;
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

int entries_in(const std::string& dir) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") ++n;
    ::closedir(d);
  }
  return n;
}

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(KvFileWriter, StreamedSectionsGiveBuildKvFilesBytes) {
  const std::string dir = fresh_dir();
  // An empty section, small ones, and a 3.5 MiB one streamed in pieces from 1 byte to 2 MiB
  // (past the writer's 1 MiB buffer both ways: buffered and written straight through).
  const std::vector<KvFileSection> sections = {{kSectionIdentity, random_bytes(100, 1)},
                                               {kSectionMethod, ""},
                                               {kSectionTokens, random_bytes(70000, 2)},
                                               {kSectionKv, random_bytes(3'500'000, 3)},
                                               {kSectionConversation, random_bytes(5, 4)}};
  const std::string path = dir + "/f.kv";
  Result<KvFileWriter> w = KvFileWriter::create(path, static_cast<uint32_t>(sections.size()));
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  for (const KvFileSection& s : sections) {
    if (s.id != kSectionKv) {
      ASSERT_TRUE(w->add(s.id, s.bytes).is_ok());
      continue;
    }
    Status st = w->add_streamed(s.id, [&] {
      const size_t pieces[] = {1, 7, 2 << 20, 4096, 65536};
      size_t at = 0;
      for (int i = 0; at < s.bytes.size(); ++i) {
        const size_t n = std::min(pieces[i % 5], s.bytes.size() - at);
        w->append(s.bytes.data() + at, n);
        at += n;
      }
      return Status::ok();
    });
    ASSERT_TRUE(st.is_ok()) << st.message();
  }
  ASSERT_TRUE(w->commit().is_ok());
  const std::string written = read_all(path);
  EXPECT_EQ(written.size(), build_kv_file(sections).size());
  EXPECT_TRUE(written == build_kv_file(sections)) << "the streamed file differs from build_kv_file's image";
  Result<std::vector<KvFileSectionView>> parsed =
      parse_kv_file(reinterpret_cast<const uint8_t*>(written.data()), written.size());
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  EXPECT_EQ(parsed->size(), sections.size());
  EXPECT_EQ(entries_in(dir), 1);  // the file, no temporary
}

TEST(KvFileWriter, AFailedSectionLeavesTheOldFileAndNoTemporary) {
  const std::string dir = fresh_dir();
  const std::string path = dir + "/f.kv";
  ASSERT_TRUE(write_file_atomically(path, "the old file").is_ok());
  {
    Result<KvFileWriter> w = KvFileWriter::create(path, 2);
    ASSERT_TRUE(w.is_ok());
    ASSERT_TRUE(w->add(kSectionIdentity, "id").is_ok());
    Status st = w->add_streamed(kSectionKv, [&] {
      const std::string big = random_bytes(3 << 20, 5);
      w->append(big.data(), big.size());  // on disk already: past the buffer
      return unsupported("a method whose state cannot be saved");
    });
    EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  }  // dropped without commit
  EXPECT_EQ(read_all(path), "the old file");
  EXPECT_EQ(entries_in(dir), 1);
}

TEST(KvFileWriter, FewerSectionsThanAnnouncedIsNotCommitted) {
  const std::string dir = fresh_dir();
  const std::string path = dir + "/f.kv";
  {
    Result<KvFileWriter> w = KvFileWriter::create(path, 3);
    ASSERT_TRUE(w.is_ok());
    ASSERT_TRUE(w->add(kSectionIdentity, "id").is_ok());
    EXPECT_FALSE(w->commit().is_ok());
  }
  EXPECT_EQ(entries_in(dir), 0);
}

}  // namespace
}  // namespace vlkv
