// `vlkv calibrate` end to end on the bundled tinyvlm-shapes: the map's keys and sizes,
// the requested lazy count, the map driving `vlkv run --kv qcache_vla:map=...`, and bad
// inputs (no inputs, a map of another model, a JSON that is not a map) -> exit 2.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_util.h"

namespace vlkv {
namespace {

std::string model() { return std::string(VLKV_SOURCE_DIR) + "/models/tinyvlm-shapes.gguf"; }
std::string mmproj() { return std::string(VLKV_SOURCE_DIR) + "/models/tinyvlm-shapes-mmproj.gguf"; }
std::string image() { return std::string(VLKV_TEST_DATA) + "/vlm/tinyvlm/images/000.png"; }
std::string stories() { return std::string(VLKV_TEST_DATA) + "/fixtures/models/stories260K.gguf"; }
std::string temp(const std::string& name) { return ::testing::TempDir() + "calibrate_" + name; }

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

TEST(CliCalibrate, WritesAMapThatQcacheLoads) {
  const std::string out = temp("map.json");
  const auto r = testing_cli::run_cli({"calibrate", "-m", model(), "--mmproj", mmproj(), "--image", image(),
                                       "--n-lazy", "3", "-o", out, "-t", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("lazy layers (3 of"), std::string::npos) << r.out;
  const nlohmann::json j = read_json(out);
  EXPECT_EQ(j["format"], "vlkv-qcache-map");
  const int n_layers = j["model"]["n_layers"].get<int>();
  ASSERT_GE(n_layers, 4);
  EXPECT_EQ(j["jsd_adjacent"].size(), static_cast<size_t>(n_layers - 1));
  EXPECT_EQ(j["jsd_adjacent_visual"].size(), static_cast<size_t>(n_layers - 1));
  EXPECT_EQ(j["criterion"], "visual");
  EXPECT_EQ(j["lazy_layers"].size(), 3u);
  for (const auto& x : j["jsd_adjacent"]) {
    EXPECT_GE(x.get<double>(), 0.0);
    EXPECT_LE(x.get<double>(), std::log(2.0) + 1e-9);
  }
  // The three lazy layers are the three lowest visual JSDs.
  std::vector<double> v = j["jsd_adjacent_visual"].get<std::vector<double>>();
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (int l : j["lazy_layers"].get<std::vector<int>>()) EXPECT_LE(v[l - 1], sorted[2]);

  const auto run = testing_cli::run_cli({"run", "-m", model(), "--mmproj", mmproj(), "--image", image(), "-p",
                                         "How many shapes are there?", "-n", "4", "--kv", "qcache_vla:map=" + out});
  EXPECT_EQ(run.exit_code, 0) << run.err;

  // The same map for another model (stories260K: other geometry) -> exit 2 naming the file.
  const auto other = testing_cli::run_cli({"run", "-m", stories(), "-p", "Once", "-n", "2", "--kv",
                                           "qcache_gla:map=" + out});
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_NE(other.err.find("another model"), std::string::npos) << other.err;
  std::remove(out.c_str());
}

TEST(CliCalibrate, BadInputsExit2) {
  const std::string out = temp("bad.json");
  auto none = testing_cli::run_cli({"calibrate", "-m", model(), "-o", out});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("calibration inputs"), std::string::npos) << none.err;
  auto no_mmproj = testing_cli::run_cli({"calibrate", "-m", model(), "--image", image(), "-o", out});
  EXPECT_EQ(no_mmproj.exit_code, 2);
  auto too_many = testing_cli::run_cli({"calibrate", "-m", model(), "--mmproj", mmproj(), "--image", image(),
                                        "--n-lazy", "999", "-o", out});
  EXPECT_EQ(too_many.exit_code, 2);
  EXPECT_NE(too_many.err.find("--n-lazy"), std::string::npos) << too_many.err;
  std::ofstream(out) << R"({"hello": "world"})";
  auto foreign = testing_cli::run_cli({"run", "-m", stories(), "-p", "Once", "-n", "2", "--kv",
                                       "qcache_vla:map=" + out});
  EXPECT_EQ(foreign.exit_code, 2);
  EXPECT_NE(foreign.err.find("not a vlkv Q Cache map"), std::string::npos) << foreign.err;
  std::remove(out.c_str());
}

}  // namespace
}  // namespace vlkv
