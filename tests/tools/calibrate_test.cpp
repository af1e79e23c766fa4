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
#include "vlkv/engine.h"

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

// The observer calibrate uses sees each layer's own q (the decoder computes every layer's;
// a GLA lazy layer's attention takes its base layer's inside the cache), and a cache with
// no lazy layer gives the f16 cache's logits bit for bit.
TEST(CliCalibrate, ObserverSeesEachLayersOwnQk) {
  auto logits_of = [&](const std::string& kv, std::vector<std::vector<float>>* q_per_layer) {
    EngineParams p;
    p.model_path = model();
    p.mmproj_path = mmproj();
    p.kv_method = kv;
    p.n_threads = 2;
    auto e = Engine::load(p);
    EXPECT_TRUE(e.is_ok()) << e.status().message();
    if (!e.is_ok()) return std::vector<float>{};
    auto s = (*e)->new_session();
    auto img = load_image(image());
    EXPECT_TRUE(img.is_ok());
    Prompt pr;
    pr.text = std::string(kMediaMarker) + "How many shapes are there?";
    pr.media.push_back(MediaItem{{std::move(img).value()}, false});
    auto prep = (*e)->prepare_prompt(pr, true);
    EXPECT_TRUE(prep.is_ok());
    if (q_per_layer) {
      q_per_layer->assign((*e)->info().n_layers, {});
      (*s)->set_attention_observer([&](const AttentionTap& t) {
        auto& q = (*q_per_layer)[t.layer];
        q.insert(q.end(), t.q, t.q + t.n_tokens * t.n_heads * t.head_dim);
      });
    }
    std::vector<float> logits;
    EXPECT_TRUE((*s)->eval_prompt(*prep, &logits).is_ok());
    return logits;
  };
  std::vector<std::vector<float>> q;
  const std::vector<float> lazy = logits_of("qcache_gla:lazy=1.3", &q);
  ASSERT_EQ(q.size(), 4u);
  for (size_t l = 0; l < q.size(); ++l) EXPECT_FALSE(q[l].empty()) << l;
  EXPECT_NE(q[1], q[0]);
  EXPECT_NE(q[3], q[2]);
  const std::vector<float> f16 = logits_of("f16", nullptr), none = logits_of("qcache_gla:lazy=none", nullptr);
  EXPECT_EQ(none, f16);
  EXPECT_NE(lazy, f16);
}

// --vqa reads what `vlkv eval --vqa` reads: a video given as frames (one <__media__> each in
// `prompt`, as tinyvideo's eval set), no `answer` needed; a bad line is refused naming it.
TEST(CliCalibrate, VqaTakesFramesItemsWithoutAnswers) {
  const std::string img = std::string(VLKV_TEST_DATA) + "/vlm/tinyvlm/images/";
  const std::string items = temp("frames.jsonl"), out = temp("frames_map.json");
  std::ofstream(items) << R"({"frames": [")" << img << R"(000.png", ")" << img
                       << R"(001.png"], "prompt": "0.0 s: <__media__>\n0.5 s: <__media__>\nHow many shapes are there?", "question": "How many shapes are there?"})"
                       << "\n" << R"({"image": ")" << img << R"(002.png", "question": "Describe the image."})" << "\n";
  const auto r = testing_cli::run_cli({"calibrate", "-m", model(), "--mmproj", mmproj(), "--vqa", items,
                                       "--n-lazy", "2", "-o", out, "-t", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_json(out)["lazy_layers"].size(), 2u);
  std::ofstream(items) << R"({"image": ")" << img << R"(000.png", "question": "x"})" << "\n" << R"({"frames": 3})" << "\n";
  const auto bad = testing_cli::run_cli({"calibrate", "-m", model(), "--mmproj", mmproj(), "--vqa", items, "-o", out});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find(":2"), std::string::npos) << bad.err;
  std::remove(items.c_str());
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
