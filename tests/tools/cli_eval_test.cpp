// `vlkv eval` end to end on the bundled stories260K (head_dim 8): rows with sane values
// (f16 vs the f16 reference: KL 0 and top-1 1.0; f32 KL tiny), the JSON keys, a method
// refusing the head_dim reported in its row, --out files, and bad inputs -> exit 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_util.h"

namespace vlkv {
namespace {

std::string stories() { return std::string(VLKV_TEST_DATA) + "/fixtures/models/stories260K.gguf"; }
std::string story() { return std::string(VLKV_TEST_DATA) + "/eval/story.txt"; }

std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> rows;
  std::stringstream ss(out);
  std::string line;
  while (std::getline(ss, line))
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

TEST(CliEval, RowsAreSaneAndJsonHasTheKeys) {
  const auto r = testing_cli::run_cli({"eval", "-m", stories(), "--text", story(), "--kv", "f16,f32,int8,int4:g=32",
                                       "--json", "-n", "160", "--prefill", "32", "-t", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = json_lines(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.out;
  for (const auto& j : rows)
    for (const char* key : {"method", "bits_per_elem", "kv_bytes_ratio", "kl_mean", "top1_agreement", "ppl", "accuracy",
                            "refused", "n_positions"})
      EXPECT_TRUE(j.contains(key)) << key << " in " << j.dump();
  const auto& f16 = rows[0];
  EXPECT_EQ(f16["method"], "f16");
  EXPECT_EQ(f16["kl_mean"].get<double>(), 0.0);  // an independent f16 run: deterministic
  EXPECT_EQ(f16["top1_agreement"].get<double>(), 1.0);
  EXPECT_EQ(f16["bits_per_elem"].get<double>(), 16.0);
  EXPECT_EQ(f16["kv_bytes_ratio"].get<double>(), 1.0);
  EXPECT_TRUE(f16["accuracy"].is_null());
  EXPECT_EQ(f16["n_positions"].get<int64_t>(), 160 - 32 - 1);
  const double ppl = f16["ppl"].get<double>();
  EXPECT_GT(ppl, 1.0);
  EXPECT_LT(ppl, 100.0);  // a story the model can read (vocabulary 512)
  EXPECT_EQ(f16["ppl_delta"].get<double>(), 0.0);
  const auto& f32 = rows[1];
  EXPECT_EQ(f32["bits_per_elem"].get<double>(), 32.0);
  EXPECT_LT(f32["kl_mean"].get<double>(), 1e-4);
  EXPECT_GE(f32["kl_mean"].get<double>(), 0.0);
  EXPECT_GE(f32["top1_agreement"].get<double>(), 0.98);
  const auto& int8 = rows[2];
  EXPECT_LT(int8["kl_mean"].get<double>(), 1e-2);
  EXPECT_LT(int8["kv_bytes_ratio"].get<double>(), 1.0);
  // int4:g=32 cannot group head_dim 8: refused in its row, the run goes on.
  const auto& refused = rows[3];
  EXPECT_TRUE(refused["refused"].is_string()) << refused.dump();
  EXPECT_TRUE(refused["kl_mean"].is_null());
}

TEST(CliEval, TableAndOutFiles) {
  const std::string dir = ::testing::TempDir() + "vlkv_eval_out_" + std::to_string(getpid());
  const auto r = testing_cli::run_cli({"eval", "-m", stories(), "--kv", "f16,int8,kivi2", "-n", "200", "--prefill",
                                       "16", "--out", dir, "-t", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("KL mean"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kivi2"), std::string::npos) << r.out;
  for (const char* f : {"results.csv", "results.jsonl", "plot.svg"})
    EXPECT_TRUE(std::filesystem::is_regular_file(dir + "/" + f)) << f;
  std::ifstream svg(dir + "/plot.svg");
  const std::string s((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_NE(s.find("<svg"), std::string::npos);
  EXPECT_NE(s.find(">int8<"), std::string::npos);
  EXPECT_NE(s.find("f16 (KL=0)"), std::string::npos);
  std::ifstream csv(dir + "/results.csv");
  std::string header, line;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("model,method,", 0), 0u);
  int n = 0;
  while (std::getline(csv, line)) n += !line.empty();
  EXPECT_EQ(n, 3);
  std::filesystem::remove_all(dir);
}

void expect_bad_input(const testing_cli::CliResult& r, const std::string& text) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(text), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliEval, BadInputsExitTwoWithAClearMessage) {
  expect_bad_input(testing_cli::run_cli({"eval", "-m", "/nonexistent/model.gguf", "--kv", "f16"}), "no such file");
  expect_bad_input(testing_cli::run_cli({"eval", "-m", stories(), "--kv", "f16,int5"}), "unknown KV method");
  expect_bad_input(testing_cli::run_cli({"eval", "-m", stories(), "--kv", "kivi2:bogus=1"}), "bogus");
  expect_bad_input(testing_cli::run_cli({"eval", "-m", stories(), "--text", "/nonexistent/story.txt"}),
                   "/nonexistent/story.txt");
  expect_bad_input(testing_cli::run_cli({"eval", "-m", stories(), "--vqa", "/nonexistent/items.jsonl"}), "--mmproj");
  expect_bad_input(testing_cli::run_cli({"eval", "-m", stories(), "--text", story(), "--prefill", "100000"}),
                   "--prefill");
}

}  // namespace
}  // namespace vlkv
