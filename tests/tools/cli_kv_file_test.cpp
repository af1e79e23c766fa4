// KV files through the commands (docs/kv_file.md): a chat saved with /save after any turn and
// continued in another process with /load gives llama-mtmd-cli's answers of the whole
// conversation byte for byte (the fixture of cli_chat_test.cpp), as does `vlkv run
// --save-kv` then `vlkv run --load-kv` with one question each; a damaged, other-method or
// other-model file is refused with one line and a non-zero exit.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"

namespace vlkv {
namespace {

using testing_cli::CliResult;
using testing_cli::run_cli;

const std::string kSrc = std::string(VLKV_SOURCE_DIR) + "/";
const std::string kModel = kSrc + "models/tinyvlm-shapes.gguf";
const std::string kMmproj = kSrc + "models/tinyvlm-shapes-mmproj.gguf";

std::string tmp(const std::string& name) {
  return ::testing::TempDir() + "vlkv_cli_kv_" + std::to_string(::getpid()) + "_" + name;
}

CliResult chat(const std::string& script, int n_predict) {
  const std::vector<std::string> args = {"chat", "-m", kModel, "--mmproj", kMmproj, "--temp", "0", "-n",
                                         std::to_string(n_predict), "-t", "1", "-q"};
  return run_cli(args, &script);
}

nlohmann::json fixture() {
  std::ifstream f(std::string(VLKV_TEST_DATA) + "/fixtures/chat/tinyvlm_mtmd_chat.json");
  return nlohmann::json::parse(f);
}

std::string line_of(const nlohmann::json& l) {
  std::string line = l.get<std::string>();
  if (line.rfind("/image ", 0) == 0) line = "/image " + kSrc + line.substr(7);
  return line + "\n";
}

// Every conversation of the fixture, cut after each of its lines that is a message: the
// first process answers up to there and saves, the second loads and answers the rest.
TEST(CliKvFile, ChatSaveThenLoadInAnotherProcessAnswersAsLlamaMtmdCli) {
  const nlohmann::json fx = fixture();
  const std::string file = tmp("chat.kv");
  int cuts = 0;
  for (const auto& c : fx["conversations"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto& script = c["script"];
    std::string want;
    for (const auto& a : c["answers"]) want += a.get<std::string>() + "\n";
    for (size_t cut = 1; cut + 1 < script.size(); ++cut) {
      if (script[cut].get<std::string>()[0] == '/') continue;  // cut after messages only
      std::string first, second = "/load " + file + "\n";
      for (size_t i = 0; i <= cut; ++i) first += line_of(script[i]);
      first += "/save " + file + "\n";
      for (size_t i = cut + 1; i < script.size(); ++i) second += line_of(script[i]);
      const CliResult a = chat(first, c["n_predict"].get<int>());
      ASSERT_EQ(a.exit_code, 0) << a.err;
      EXPECT_EQ(a.err, "");
      const CliResult b = chat(second, c["n_predict"].get<int>());
      ASSERT_EQ(b.exit_code, 0) << b.err;
      EXPECT_EQ(b.err, "");
      EXPECT_EQ(a.out + b.out, want) << "cut after line " << cut;
      ++cuts;
    }
  }
  EXPECT_EQ(cuts, 9);  // 3 per conversation: a cut after each message but the last line
  std::remove(file.c_str());
}

TEST(CliKvFile, RunSaveKvThenLoadKvAnswersAsTheChat) {
  const std::string file = tmp("run.kv");
  const std::vector<std::string> common = {"-m", kModel, "--mmproj", kMmproj, "--temp", "0", "-n", "32", "-t", "1", "-q"};
  std::vector<std::string> a = {"run", "--image", kSrc + "models/demo/005.png", "-p", "How many shapes are there?",
                                "--save-kv", file};
  a.insert(a.end(), common.begin(), common.end());
  const CliResult ra = run_cli(a);
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  std::vector<std::string> b = {"run", "-p", "Describe the image.", "--load-kv", file};
  b.insert(b.end(), common.begin(), common.end());
  const CliResult rb = run_cli(b);
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  // The fixture's conversation a_n32: the same image and questions in one chat.
  const nlohmann::json fx = fixture();
  const auto& answers = fx["conversations"][0]["answers"];
  EXPECT_EQ(ra.out, answers[0].get<std::string>() + "\n");
  EXPECT_EQ(rb.out, answers[1].get<std::string>() + "\n");

  // Refusals: one line on stderr, non-zero exit, no answer.
  auto refused = [&](const std::vector<std::string>& extra, const std::string& path, const std::string& expected) {
    std::vector<std::string> args = {"run", "-p", "Describe the image.", "--load-kv", path};
    args.insert(args.end(), common.begin(), common.end() - 1);  // without -q: errors still go to stderr
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_cli(args);
    EXPECT_NE(r.exit_code, 0) << expected;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  refused({"--kv", "kivi2"}, file, "it holds KV method f16");
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const std::string bad = tmp("bad.kv");
  std::ofstream(bad, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  refused({}, bad, "truncated");
  bytes[bytes.size() - 5] ^= 0x10;
  std::ofstream(bad, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  refused({}, bad, "bad checksum of section");
  refused({}, tmp("missing.kv"), "cannot open");
  std::remove(file.c_str());
  std::remove(bad.c_str());
}

// Issues 38 and 40: --save-kv to a place it cannot write fails before the model answers (it
// failed only after the whole ingest), and a target that is no regular file is refused, not
// replaced; vlkv chat's /save says the same and the conversation goes on.
TEST(CliKvFile, SaveKvToWhatCannotBeWrittenFailsBeforeTheWork) {
  const std::vector<std::string> common = {"-m", kModel, "--mmproj", kMmproj, "--temp", "0", "-n", "8", "-t", "1"};
  auto run_saving = [&](const std::string& target) {
    std::vector<std::string> a = {"run", "--image", kSrc + "models/demo/005.png", "-p", "How many shapes are there?",
                                  "--save-kv", target};
    a.insert(a.end(), common.begin(), common.end());
    return run_cli(a);
  };
  CliResult r = run_saving(tmp("no_such_folder") + "/out.kv");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "") << "answered before finding out it cannot save";
  EXPECT_NE(r.err.find("cannot write"), std::string::npos) << r.err;
  const std::string fifo = tmp("target.fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = run_saving(fifo);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("it is a FIFO, not a regular file"), std::string::npos) << r.err;
  const std::string script = "Hello\n/save " + fifo + "\nHi\n";
  r = chat(script, 4);
  EXPECT_NE(r.err.find("it is a FIFO, not a regular file"), std::string::npos) << r.err;
  struct stat sb;
  ASSERT_EQ(::lstat(fifo.c_str(), &sb), 0);
  EXPECT_TRUE(S_ISFIFO(sb.st_mode)) << "the FIFO was replaced by a file";
  std::remove(fifo.c_str());
}

}  // namespace
}  // namespace vlkv
