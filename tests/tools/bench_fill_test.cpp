// vlkv bench --fill random: the cache reaches each depth by storing random K/V through
// the method (no model run), so a 2K-depth row takes well under a second on a tiny
// generated model; the prefill column is timed apart on --prefill-tokens; the JSON rows
// carry issue #3's keys; the held bytes equal those a real prefill leaves (same windows,
// folds and segments); a --kv list keeps a method's comma-separated parameters together.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"
#include "random_model.h"

namespace vlkv {
namespace {

// A file of this process's own: ctest runs each test case as a separate process, in
// parallel, so a shared name would let one process read another's half-written model.
struct TempModelFile {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("vlkv_bench_fill_tiny_" + std::to_string(::getpid()) + ".gguf")).string();
  ~TempModelFile() { std::remove(path.c_str()); }
};

// 2 layers, 2 kv heads of 64: small enough that a real 600-token prefill takes ~0.1 s.
const std::string& tiny_model() {
  static const TempModelFile file;
  static const std::string path = [] {
    const std::string& p = file.path;
    RandomModelSpec s;
    s.n_embd = 128;
    s.n_layers = 2;
    s.n_heads = 4;
    s.n_kv_heads = 2;
    s.head_dim = 64;
    s.n_ff = 256;
    s.n_vocab = 512;
    s.context_length = 4096;
    s.seed = 11;
    EXPECT_TRUE(write_random_llama(s, p).is_ok());
    return p;
  }();
  return path;
}

std::vector<nlohmann::json> json_rows(const std::string& out) {
  std::vector<nlohmann::json> rows;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t nl = out.find('\n', pos);
    if (nl == std::string::npos) nl = out.size();
    if (nl > pos) rows.push_back(nlohmann::json::parse(out.substr(pos, nl - pos)));
    pos = nl + 1;
  }
  return rows;
}

testing_cli::CliResult bench(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"bench", "-m", tiny_model(), "--json", "--no-bandwidth", "-t", "1", "-n", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return testing_cli::run_cli(args);
}

TEST(BenchFill, RandomFillReachesTheDepthWithTheDocumentedKeys) {
  const auto r = bench({"--fill", "random", "--ctx", "2K", "--prefill-tokens", "32", "--kv",
                        "f16,kivi2:residual=64,g=32,int2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<nlohmann::json> rows = json_rows(r.out);
  ASSERT_EQ(rows.size(), 3u) << r.out;
  const std::vector<std::string> methods = {"f16", "kivi2:residual=64,g=32", "int2"};
  const std::vector<double> bits = {16.0, 3.0, 3.0};  // int2 at g=32: 2 + 32 bits of scale+min per 32
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& j = rows[i];
    for (const char* key : {"method", "ctx", "prefill_tok_s", "decode_tok_s", "kv_bytes_per_token", "bits_per_elem",
                            "peak_rss_bytes", "max_seqs_in_budget", "fill", "prefill_tokens", "kv_held_bytes_per_token", "load_ms"})
      EXPECT_TRUE(j.contains(key)) << key << " missing in " << j.dump();
    EXPECT_GT(j["load_ms"].get<double>(), 0);  // a real load (mapping and binding) takes time
    EXPECT_EQ(j["method"], methods[i]);
    EXPECT_EQ(j["ctx"], 2048);
    EXPECT_EQ(j["fill"], "random");
    EXPECT_EQ(j["prefill_tokens"], 32);
    EXPECT_GT(j["prefill_tok_s"].get<double>(), 0);
    EXPECT_GT(j["decode_tok_s"].get<double>(), 0);
    // CPU per token: positive, and at most what 2 busy threads (-t 1 plus the caller) spend in its wall time.
    EXPECT_GT(j["decode_cpu_ms_per_token"].get<double>(), 0);
    EXPECT_LE(j["decode_cpu_ms_per_token"].get<double>(), 2.0 * 1e3 / j["decode_tok_s"].get<double>());
    EXPECT_EQ(j["bits_per_elem"].get<double>(), bits[i]);
    EXPECT_GT(j["max_seqs_in_budget"].get<int64_t>(), 0);
    // Held pages cover at least the method's steady-state bytes of the 2050 tokens.
    EXPECT_GE(j["kv_held_bytes_per_token"].get<double>(), j["kv_bytes_per_token"].get<double>());
  }
}

// The random fill stores through the same path and chunking as a prefill: same pages held.
TEST(BenchFill, HeldBytesEqualARealPrefills) {
  const std::string methods = "f16,kivi2:residual=64,g=32,vidkv,int4";
  const auto random = bench({"--fill", "random", "--ctx", "600", "--prefill-tokens", "8", "--kv", methods});
  const auto prefill = bench({"--fill", "prefill", "--ctx", "600", "--kv", methods});
  ASSERT_EQ(random.exit_code, 0) << random.err;
  ASSERT_EQ(prefill.exit_code, 0) << prefill.err;
  const auto a = json_rows(random.out), b = json_rows(prefill.out);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["method"], b[i]["method"]);
    EXPECT_EQ(a[i]["kv_held_bytes_per_token"], b[i]["kv_held_bytes_per_token"]) << a[i]["method"];
    EXPECT_EQ(b[i]["fill"], "prefill");
    EXPECT_EQ(b[i]["prefill_tokens"], 600);  // --fill prefill times the depth's own prefill
  }
}

TEST(BenchFill, TableNamesTheFillMode) {
  const auto r = testing_cli::run_cli({"bench", "-m", tiny_model(), "--no-bandwidth", "-t", "1", "-n", "1", "--ctx",
                                       "1K", "--prefill-tokens", "16", "--kv", "f16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("# fill random"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" random "), std::string::npos) << r.out;
}

TEST(BenchFill, BadValuesAreFlagErrors) {
  const auto fill = bench({"--fill", "zeros", "--ctx", "64"});
  EXPECT_EQ(fill.exit_code, 2);
  EXPECT_NE(fill.err.find("--fill"), std::string::npos) << fill.err;
  const auto prefill = bench({"--prefill-tokens", "0", "--ctx", "64"});
  EXPECT_EQ(prefill.exit_code, 2);
  EXPECT_NE(prefill.err.find("--prefill-tokens"), std::string::npos) << prefill.err;
  const auto ctx = bench({"--ctx", "4K"});  // + 2 decode steps exceed the model's 4096
  EXPECT_EQ(ctx.exit_code, 2);
  EXPECT_EQ(ctx.err.rfind("vlkv: error: --ctx", 0), 0u) << ctx.err;
}

// --parallel: rows per count with the batched columns; max admits as many as the budget
// reserves for and prints the capacity line; a bad count exits with status 2.
TEST(BenchParallel, RowsCarryParallelColumnsAndMaxPrintsTheCapacity) {
  const auto r = bench({"--ctx", "1K", "--prefill-tokens", "16", "--kv", "f16,kivi2", "--parallel", "1,3,max",
                        "--kv-budget", "16M"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<nlohmann::json> rows = json_rows(r.out);
  ASSERT_EQ(rows.size(), 6u) << r.out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& j = rows[i];
    const int64_t parallel = j["parallel"].get<int64_t>();
    if (i % 3 < 2) EXPECT_EQ(parallel, i % 3 == 0 ? 1 : 3);
    else EXPECT_GT(parallel, 3);
    EXPECT_NEAR(j["decode_tok_s"].get<double>(), j["seq_decode_tok_s"].get<double>() * parallel,
                1e-6 * j["decode_tok_s"].get<double>());
    EXPECT_GT(j["kv_stored_bytes_per_token"].get<double>(), 0);
    EXPECT_GE(j["kv_held_bytes_per_token"].get<double>(), j["kv_stored_bytes_per_token"].get<double>());
    // Per generated token over all sequences, as decode_tok_s counts them.
    EXPECT_GT(j["decode_cpu_ms_per_token"].get<double>(), 0);
    EXPECT_LE(j["decode_cpu_ms_per_token"].get<double>(), 2.0 * 1e3 / j["decode_tok_s"].get<double>());
  }
  EXPECT_GT(rows[5]["parallel"].get<int64_t>(), rows[2]["parallel"].get<int64_t>());  // kivi2 admits more than f16
  EXPECT_NE(r.err.find("KV budget 16.0 MiB: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" sequences of 1026 tokens"), std::string::npos) << r.err;
  const auto bad = bench({"--ctx", "64", "--kv", "f16", "--parallel", "0"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--parallel"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace vlkv
