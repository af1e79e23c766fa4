// Defaults that work on small models: `vlkv bench` without --ctx benchmarks the depths the
// model holds (a note says which were left out) instead of failing; an answer that fills
// the context ends there as a length stop (exit 0, a note on stderr), not as an error.
#include <gtest/gtest.h>

#include <string>

#include "cli_util.h"

namespace vlkv {
namespace {

std::string stories() { return std::string(VLKV_TEST_DATA) + "/fixtures/models/stories260K.gguf"; }  // 512 tokens

TEST(CliDefaults, BenchWithoutCtxTakesTheDepthsTheModelHolds) {
  const auto r = testing_cli::run_cli({"bench", "-m", stories(), "-n", "2", "--no-bandwidth", "--prefill-tokens", "16"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(" 128 "), std::string::npos) << r.out;  // the 128 row (the 1K and 4K rows do not fit)
  EXPECT_EQ(r.out.find(" 1024 "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("vlkv: note: the model's context is 512 tokens"), std::string::npos) << r.err;
  // Depths given on the command line are the user's: refused, naming what helps.
  const auto given = testing_cli::run_cli({"bench", "-m", stories(), "-n", "2", "--no-bandwidth", "--ctx", "4K"});
  EXPECT_EQ(given.exit_code, 2);
  EXPECT_NE(given.err.find("`vlkv gen-model` its --ctx"), std::string::npos) << given.err;
}

TEST(CliDefaults, AnAnswerThatFillsTheContextStopsThereWithExitZero) {
  const auto r = testing_cli::run_cli({"run", "-m", stories(), "-c", "24", "-p", "Once upon a time", "-n", "200",
                                       "--temp", "0", "--ignore-eos", "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.err;  // was: exit 2, "context full"
  EXPECT_FALSE(r.out.empty());
  EXPECT_NE(r.err.find("vlkv: note: the context of 24 tokens is full: the answer stops here (raise --ctx-size, up to "
                       "512)"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace vlkv
