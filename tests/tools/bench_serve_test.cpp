// vlkv bench-serve against a real vlkv serve on 127.0.0.1: every request counted, the
// latency figures present and ordered, the server's peak of running requests bounded by
// the concurrency and by -np; an unreachable server is an error, not an empty report.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "serve_util.h"

namespace vlkv {
namespace {

using nlohmann::json;
using namespace testing_serve;
using testing_cli::run_cli;

TEST(BenchServe, ReportsEveryRequestAndTheServersPeakConcurrency) {
  // 50 ms per token: a request runs ~0.4 s, long enough for the 100 ms /metrics samples.
  ServerProcess server({"-m", stories_path(), "-t", "1", "-np", "3", "--kv-budget", "64M", "--kv-allow", "kivi2",
                        "--token-delay-ms", "50"});
  ASSERT_TRUE(server.running()) << server.log();
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  const auto r = run_cli({"bench-serve", "--url", url, "--concurrency", "1,6", "--requests", "6", "--max-tokens", "8",
                          "--prompt", "Once upon a time", "--kv", "kivi2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json rows = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(rows.is_array() && rows.size() == 2) << r.out;
  for (const json& row : rows) {
    SCOPED_TRACE(row.dump());
    EXPECT_EQ(row["completed"], 6);
    EXPECT_EQ(row["failed"], 0);
    EXPECT_EQ(row["kv"], "kivi2");
    EXPECT_GT(row["output_tokens"].get<int>(), 0);
    EXPECT_GT(row["ttft_ms"]["mean"].get<double>(), 0);
    EXPECT_LE(row["ttft_ms"]["p50"].get<double>(), row["ttft_ms"]["p99"].get<double>());
    EXPECT_GT(row["server_peak_kv_bytes"].get<double>(), 0);
  }
  // One client at a time, then six against three slots (-np 3).
  EXPECT_EQ(rows[0]["server_peak_running"], 1);
  EXPECT_GE(rows[1]["server_peak_running"].get<double>(), 1);
  EXPECT_LE(rows[1]["server_peak_running"].get<double>(), 3);
  // The server counted what the client did.
  httplib::Client c = server.client();
  const std::string metrics = get(c, "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "vlkv:kv_requests_total{method=\"kivi2\"}"), 12) << metrics;
  EXPECT_EQ(server.stop(), 0);
}

TEST(BenchServe, DistinctPromptsDifferPerRequest) {
  ServerProcess server({"-m", stories_path(), "-t", "1", "--kv-budget", "64M"});
  ASSERT_TRUE(server.running()) << server.log();
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  httplib::Client c = server.client();
  auto prompt_tokens = [&] { return metric_value(get(c, "/metrics").body, "vlkv:prompt_tokens_total"); };
  const std::vector<std::string> run = {"bench-serve", "--url", url, "--concurrency", "1", "--requests", "2",
                                        "--max-tokens", "2", "--prompt", "Once upon a time"};
  ASSERT_EQ(run_cli(run).exit_code, 0);
  const double same = prompt_tokens();
  std::vector<std::string> distinct = run;
  distinct.push_back("--distinct");
  ASSERT_EQ(run_cli(distinct).exit_code, 0);
  const double both = prompt_tokens();
  // "Request 1. " and "Request 2. " lengthen every prompt: more prompt tokens than the shared text's.
  EXPECT_GT(both - same, same) << "shared: " << same << ", after distinct: " << both;
  EXPECT_EQ(server.stop(), 0);
}

TEST(BenchServe, NoServerIsAnError) {
  const auto r = run_cli({"bench-serve", "--url", "http://127.0.0.1:1", "--requests", "1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no server answers"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vlkv
