// Bad input at the CLI: one clear error line naming the file, exit status 2, no crash.
#include <gtest/gtest.h>

#include <fstream>

#include "cli_util.h"

namespace vlkv {
namespace {

std::string model_path() { return std::string(VLKV_TEST_DATA) + "/fixtures/models/stories260K.gguf"; }

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

void expect_bad_input(const testing_cli::CliResult& r, const std::string& must_mention) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(must_mention), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliBadInput, MissingFile) {
  expect_bad_input(testing_cli::run_cli({"run", "-m", "/nonexistent/model.gguf", "-p", "hi"}), "/nonexistent/model.gguf");
}

TEST(CliBadInput, TruncatedFile) {
  const std::string full = read_file(model_path());
  for (size_t len : {size_t{0}, size_t{3}, size_t{24}, size_t{1000}, full.size() / 2, full.size() - 1}) {
    SCOPED_TRACE(len);
    const std::string p = write_temp("truncated.gguf", full.substr(0, len));
    expect_bad_input(testing_cli::run_cli({"run", "-m", p, "-p", "hi", "-n", "2"}), "truncated.gguf");
    expect_bad_input(testing_cli::run_cli({"info", p}), "truncated.gguf");
  }
}

TEST(CliBadInput, WrongMagic) {
  std::string bytes = read_file(model_path());
  bytes[0] = 'X';
  const std::string p = write_temp("magic.gguf", bytes);
  expect_bad_input(testing_cli::run_cli({"run", "-m", p, "-p", "hi"}), "magic.gguf");
}

TEST(CliBadInput, UnknownVersion) {
  std::string bytes = read_file(model_path());
  bytes[4] = 99;  // version is the little-endian u32 after the magic
  const std::string p = write_temp("version.gguf", bytes);
  expect_bad_input(testing_cli::run_cli({"run", "-m", p, "-p", "hi"}), "version.gguf");
}

TEST(CliBadInput, AbsurdParameters) {
  EXPECT_EQ(testing_cli::run_cli({"run", "-m", model_path(), "-p", "hi", "-n", "-5"}).exit_code, 2);
  EXPECT_EQ(testing_cli::run_cli({"run", "-m", model_path(), "-p", "hi", "--kv", "nonsense"}).exit_code, 2);
  EXPECT_EQ(testing_cli::run_cli({"run", "-m", model_path(), "-p", "hi", "--kv-budget", "lots"}).exit_code, 2);
  EXPECT_EQ(testing_cli::run_cli({"run", "-m", model_path(), "-p", "hi", "-t", "100000"}).exit_code, 2);
  EXPECT_EQ(testing_cli::run_cli({"bench", "-m", model_path(), "--ctx", "0"}).exit_code, 2);
}

TEST(CliBadInput, KvBudgetExhaustedIsAnErrorNotACrash) {
  testing_cli::CliResult r = testing_cli::run_cli(
      {"run", "-m", model_path(), "-p", "Once upon a time", "-n", "400", "--ignore-eos", "--temp", "0",
       "--kv", "f32", "--kv-budget", "64K"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("budget"), std::string::npos) << r.err;
}

// A prompt the context cannot hold is bad input; an answer that fills the context is a
// length stop instead (exit 0: CliDefaults.AnAnswerThatFillsTheContextStopsThereWithExitZero).
TEST(CliBadInput, ContextFullIsReported) {
  testing_cli::CliResult r = testing_cli::run_cli(
      {"run", "-m", model_path(), "-p", "Once upon a time there was a little girl", "-n", "100", "--temp", "0", "-c", "4"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("context full"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vlkv
