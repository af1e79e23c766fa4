// The KV flags at the CLI: `vlkv methods` lists the registered methods and their parameters;
// an unknown method or parameter, a group the codec cannot do for the model's head_dim,
// a budget smaller than one page or than the model's first token, and a context longer
// than the model's give one error line naming the flag and exit status 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cli_util.h"
#include "kv/method_registry.h"

namespace vlkv {
namespace {

std::string stories() { return std::string(VLKV_TEST_DATA) + "/fixtures/models/stories260K.gguf"; }  // head_dim 8

void expect_flag_error(const testing_cli::CliResult& r, const std::string& flag, const std::string& also = "") {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("vlkv: error: " + flag, 0), 0u) << r.err;  // the line starts with the flag
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  if (!also.empty()) {
    EXPECT_NE(r.err.find(also), std::string::npos) << r.err;
  }
}

TEST(CliKvFlags, MethodsListsEveryRegisteredMethodAndItsParameters) {
  const auto all = testing_cli::run_cli({"methods"});
  EXPECT_EQ(all.exit_code, 0) << all.err;
  for (const MethodInfo* m : list_methods()) {
    EXPECT_NE(all.out.find(m->name + " "), std::string::npos) << "vlkv methods lacks " << m->name;
    const auto one = testing_cli::run_cli({"methods", m->name});
    EXPECT_EQ(one.exit_code, 0) << one.err;
    EXPECT_EQ(one.out.rfind(m->name + ": ", 0), 0u) << one.out;
    for (const ParamInfo& p : m->params)
      EXPECT_NE(one.out.find(p.name + "=" + p.default_value), std::string::npos) << m->name << " " << p.name;
  }
  const auto unknown = testing_cli::run_cli({"methods", "int5"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("no KV method 'int5'; registered: "), std::string::npos) << unknown.err;
  // The commands' help points to the catalogue instead of repeating it.
  for (const char* cmd : {"run", "bench"}) {
    const auto r = testing_cli::run_cli({cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("`vlkv methods` lists them"), std::string::npos) << cmd;
  }
}

TEST(CliKvFlags, UnknownMethodOrParameter) {
  expect_flag_error(testing_cli::run_cli({"run", "-m", stories(), "-p", "hi", "-n", "1", "--kv", "int5"}), "--kv",
                    "valid methods");
  expect_flag_error(testing_cli::run_cli({"run", "-m", stories(), "-p", "hi", "-n", "1", "--kv", "f16:bits=2"}),
                    "--kv", "no parameter 'bits'");
  expect_flag_error(testing_cli::run_cli({"run", "-m", stories(), "-p", "hi", "--kv", "f16:"}), "--kv");
  expect_flag_error(testing_cli::run_cli({"bench", "-m", stories(), "--ctx", "16", "--no-bandwidth", "--kv",
                                          "f16,nosuch"}),
                    "--kv", "nosuch");
}

TEST(CliKvFlags, ValuesTheCodecCannotDoForTheModel) {
  // stories260K has head_dim 8: a group of 32 channels cannot divide it.
  expect_flag_error(testing_cli::run_cli({"run", "-m", stories(), "-p", "hi", "-n", "1", "--kv", "int4:g=32"}), "--kv",
                    "head_dim 8");
  expect_flag_error(testing_cli::run_cli({"run", "-m", stories(), "-p", "hi", "-n", "1", "--kv", "int4:g=7"}), "--kv");
  expect_flag_error(testing_cli::run_cli({"run", "-m", stories(), "-p", "hi", "-n", "1", "--kv", "kivi:bits=3"}),
                    "--kv");
}

TEST(CliKvFlags, BudgetTooSmall) {
  expect_flag_error(testing_cli::run_cli({"run", "-m", stories(), "-p", "hi", "--kv-budget", "1K"}), "--kv-budget",
                    "one KV page");
  // stories260K: 5 layers x 4 kv heads x K/V = 40 streams of at least one 2 KiB page: 80 KiB.
  expect_flag_error(testing_cli::run_cli({"run", "-m", stories(), "-p", "hi", "--kv-budget", "64K"}), "--kv-budget",
                    "40 (80 KiB) for its first token");
  expect_flag_error(testing_cli::run_cli({"bench", "-m", stories(), "--ctx", "16", "--no-bandwidth", "--kv-budget",
                                          "0"}),
                    "--kv-budget");
}

// The checks use the cache's real page size (2 KiB), not an old 64 KiB assumption: a budget
// of 100K holds 50 pages, enough for stories260K's 40 streams, and runs.
TEST(CliKvFlags, BudgetCheckedInTheCachesPageSize) {
  const testing_cli::CliResult r =
      testing_cli::run_cli({"run", "-m", stories(), "-p", "Once", "-n", "4", "--kv-budget", "100K"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("held 81920 B (80.0 KiB of pages"), std::string::npos) << r.err;
}

// A wrapper with parameters around a method with parameters: each part is its own spec.
TEST(CliKvFlags, ComposedMethodsWithParametersOnBothSides) {
  const testing_cli::CliResult ok =
      testing_cli::run_cli({"run", "-m", stories(), "-p", "Once", "-n", "4", "--kv", "qcache_gla:n_lazy=1+kivi2:residual=32"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.err.find("lazy layers"), std::string::npos) << ok.err;
  expect_flag_error(testing_cli::run_cli({"run", "-m", stories(), "-p", "Once", "--kv", "qcache_gla:n_lazy=1+kivi2:wat=1"}),
                    "--kv", "no parameter 'wat'");
  // A value the inner method cannot take on this model: its message names only the inner
  // method, the flag comes from the error's kind.
  expect_flag_error(testing_cli::run_cli({"run", "-m", stories(), "-p", "Once", "--kv", "qcache_gla:n_lazy=1+kivi:bits=3"}),
                    "--kv 'qcache_gla:n_lazy=1+kivi:bits=3': 'kivi': bits=3");
}

// Statistics a text-only prompt cannot give: the method runs, degraded, with one warning.
TEST(CliKvFlags, TextOnlyPromptWarnsForMethodsThatNeedVisualTokens) {
  for (const std::string kv : {"vidkv", "qcache_vla", "qcache_gla+vidkv"}) {
    const testing_cli::CliResult r = testing_cli::run_cli({"run", "-m", stories(), "-p", "Once", "-n", "4", "--kv", kv});
    EXPECT_EQ(r.exit_code, 0) << kv << ": " << r.err;
    EXPECT_NE(r.err.find("this prompt has no visual tokens"), std::string::npos) << kv << ": " << r.err;
  }
  for (const std::string kv : {"kivi2", "qcache_gla"}) {
    const testing_cli::CliResult r = testing_cli::run_cli({"run", "-m", stories(), "-p", "Once", "-n", "4", "--kv", kv});
    EXPECT_EQ(r.exit_code, 0) << kv << ": " << r.err;
    EXPECT_EQ(r.err.find("warning"), std::string::npos) << kv << ": " << r.err;
  }
}

TEST(CliKvFlags, ContextLongerThanTheModel) {
  expect_flag_error(testing_cli::run_cli({"run", "-m", stories(), "-p", "hi", "-c", "1000000"}), "--ctx-size",
                    "model's context");
  expect_flag_error(testing_cli::run_cli({"bench", "-m", stories(), "--ctx", "64K", "--no-bandwidth"}), "--ctx",
                    "model's context");
  expect_flag_error(testing_cli::run_cli({"bench", "-m", stories(), "--ctx", "12x", "--no-bandwidth"}), "--ctx");
}

TEST(CliKvFlags, BenchJsonHasTheDocumentedKeys) {
  const auto r = testing_cli::run_cli({"bench", "-m", stories(), "--kv", "f16,kivi2", "--ctx", "40", "-n", "2",
                                       "--json", "--no-bandwidth", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int lines = 0;
  for (size_t pos = 0; pos < r.out.size();) {
    const size_t nl = r.out.find('\n', pos);
    const std::string line = r.out.substr(pos, nl - pos);
    pos = nl == std::string::npos ? r.out.size() : nl + 1;
    if (line.empty()) continue;
    ++lines;
    for (const char* key : {"\"method\"", "\"ctx\"", "\"prefill_tok_s\"", "\"decode_tok_s\"", "\"kv_bytes_per_token\"",
                            "\"kv_held_bytes_per_token\"", "\"bits_per_elem\"", "\"peak_rss_bytes\"",
                            "\"max_seqs_in_budget\"", "\"roofline_pct\""})
      EXPECT_NE(line.find(key), std::string::npos) << key << " missing in " << line;
  }
  EXPECT_EQ(lines, 2);
}

}  // namespace
}  // namespace vlkv
