// `vlkv eval --vqa` on video-style items: the item reader (image / frames / video file, the
// errors a bad line gets) and, end to end on the bundled tinyvlm-shapes pair, items of two
// lengths and two types giving the per-length and per-type tables and files.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "cli_util.h"
#include "eval/vqa_items.h"

namespace vlkv::cli {
namespace {

std::string temp_dir(const std::string& name) {
  const std::string d = ::testing::TempDir() + name + "_" + std::to_string(getpid());
  std::filesystem::create_directories(d);
  return d;
}

std::string write_items(const std::string& dir, const std::string& lines) {
  const std::string p = dir + "/items.jsonl";
  std::ofstream(p) << lines;
  return p;
}

TEST(EvalVqaItems, ReadsImageFramesAndVideoItems) {
  const std::string dir = temp_dir("vqa_items_read");
  const std::string p = write_items(
      dir,
      R"({"image": "a.png", "question": "Q1", "answer": "A1"})"
      "\n\n"
      R"({"frames": ["f0.png", "/abs/f1.png"], "prompt": "0.0 s: <__media__>\n0.5 s: <__media__>\nQ2", "question": "Q2", "answer": "A2", "type": "count", "n_frames": 2})"
      "\n"
      R"({"video": "clip.mp4", "question": "Q3", "answer": "A3", "fps": 0.5})"
      "\n");
  Result<std::vector<VqaItem>> r = read_vqa_items(p, 0);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->size(), 3u);
  const VqaItem& img = (*r)[0];
  EXPECT_EQ(img.media, VqaItem::Media::kImage);
  EXPECT_EQ(img.paths, std::vector<std::string>{dir + "/a.png"});
  EXPECT_EQ(img.message, "Q1");  // no prompt: the question
  EXPECT_EQ(img.n_frames, 1);
  const VqaItem& fr = (*r)[1];
  EXPECT_EQ(fr.media, VqaItem::Media::kFrames);
  EXPECT_EQ(fr.paths, (std::vector<std::string>{dir + "/f0.png", "/abs/f1.png"}));
  EXPECT_EQ(fr.message, "0.0 s: <__media__>\n0.5 s: <__media__>\nQ2");
  EXPECT_EQ(fr.type, "count");
  EXPECT_EQ(fr.n_frames, 2);
  EXPECT_EQ(fr.line, 3);
  const VqaItem& vid = (*r)[2];
  EXPECT_EQ(vid.media, VqaItem::Media::kVideoFile);
  EXPECT_EQ(vid.fps, 0.5);
  Result<std::vector<VqaItem>> limited = read_vqa_items(p, 2);
  ASSERT_TRUE(limited.is_ok());
  EXPECT_EQ(limited->size(), 2u);
  std::filesystem::remove_all(dir);
}

TEST(EvalVqaItems, BadLinesSayWhereAndWhat) {
  const std::string dir = temp_dir("vqa_items_bad");
  const std::map<std::string, std::string> cases = {
      {R"({"image": "a.png", "answer": "A"})", "missing string field 'question'"},
      {R"({"question": "Q", "answer": "A"})", "needs 'image', 'frames' or 'video'"},
      {R"({"frames": "a.png", "question": "Q", "answer": "A"})", "'frames' must be a non-empty array"},
      {R"({"frames": [], "question": "Q", "answer": "A"})", "'frames' must be a non-empty array"},
      {R"({"frames": ["a.png", 3], "question": "Q", "answer": "A"})", "non-string"},
      {R"({"frames": ["a.png"], "n_frames": 2, "question": "Q", "answer": "A"})", "'n_frames' 2 but 1 frames"},
      {R"({"video": "c.mp4", "question": "Q", "answer": "A"})", "needs 'n_frames' or 'fps'"},
      {R"({"video": "c.mp4", "n_frames": -4, "question": "Q", "answer": "A"})", "'n_frames' must be an integer"},
      {R"({"video": "c.mp4", "fps": 0, "question": "Q", "answer": "A"})", "'fps' must be a number"},
      {R"({"image": "a.png", "question": "Q", "answer": 7})", "'answer' is not a string"},
      {R"([1, 2])", "not a JSON object"},
      {R"({"image": )", "not JSON"},
  };
  for (const auto& [line, want] : cases) {
    const std::string p = write_items(dir, R"({"image": "ok.png", "question": "Q", "answer": "A"})" "\n" + line + "\n");
    Result<std::vector<VqaItem>> r = read_vqa_items(p, 0);
    ASSERT_FALSE(r.is_ok()) << line;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << line << " -> " << r.status().message();
    EXPECT_NE(r.status().message().find("items.jsonl:2"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(read_vqa_items(write_items(dir, "\n \n"), 0).is_ok());  // no items
  std::filesystem::remove_all(dir);
}

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Two one-picture items and two two-frame items (the frames: two of tinyvlm-shapes' eval
// pictures, a time marker before each, as a video is fed), two question types.
TEST(EvalVqaItems, FramesItemsGetPerLengthAndPerTypeTables) {
  const std::string img = std::string(VLKV_TEST_DATA) + "/vlm/tinyvlm/images/";
  const std::string dir = temp_dir("vqa_eval_frames");
  const std::string items = write_items(
      dir, R"({"image": ")" + img + R"(000.png", "question": "How many shapes are there?", "answer": "one", "type": "count"})" "\n"
           R"({"image": ")" + img + R"(003.png", "question": "Describe the image.", "answer": "x", "type": "describe"})" "\n"
           R"({"frames": [")" + img + R"(000.png", ")" + img + R"(001.png"], "prompt": "0.0 s: <__media__>\n0.5 s: <__media__>\nHow many shapes are there?", "question": "How many shapes are there?", "answer": "two", "type": "count"})" "\n"
           R"({"frames": [")" + img + R"(001.png", ")" + img + R"(002.png"], "prompt": "0.0 s: <__media__>\n0.5 s: <__media__>\nDescribe the image.", "question": "Describe the image.", "answer": "y", "type": "describe"})" "\n");
  const std::string models = std::string(VLKV_SOURCE_DIR) + "/models/";
  const std::string out = dir + "/out";
  const auto r = testing_cli::run_cli({"eval", "-m", models + "tinyvlm-shapes.gguf", "--mmproj",
                                       models + "tinyvlm-shapes-mmproj.gguf", "--vqa", items, "--kv", "f16,kivi2",
                                       "--max-answer", "8", "--out", out, "-t", "2", "--answers"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("accuracy by frames (items)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("#1 count: How many shapes are there?  (expected: one)\n   f16 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("#3 count, 2 frames: How many shapes are there?  (expected: two)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("accuracy by type (items)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tok/s"), std::string::npos) << r.out;
  // breakdown.csv: per method, groups 1 and 2 (frames) and count / describe (type), 2 items each.
  std::stringstream csv(read_all(out + "/breakdown.csv"));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line.rfind("model,method,by,group,n_items,accuracy,kl_mean,", 0), 0u) << line;
  std::map<std::string, int> seen;
  while (std::getline(csv, line)) {
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    ASSERT_GE(f.size(), 11u) << line;
    ++seen[f[1] + "/" + f[2] + "/" + f[3]];
    EXPECT_EQ(f[4], "2") << line;
    const double acc = std::stod(f[5]);
    EXPECT_GE(acc, 0.0);
    EXPECT_LE(acc, 1.0);
    if (f[1] == "f16") {
      EXPECT_EQ(std::stod(f[6]), 0.0) << "f16 against the f16 reference: " << line;
    }
    EXPECT_GT(std::stod(f[9]), 0.0) << "held bytes ratio: " << line;
  }
  for (const char* m : {"f16", "kivi2"})
    for (const char* g : {"n_frames/1", "n_frames/2", "type/count", "type/describe"})
      EXPECT_EQ(seen[std::string(m) + "/" + g], 1) << m << " " << g;
  const std::string svg = read_all(out + "/accuracy_vs_frames.svg");
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find(">kivi2<"), std::string::npos);
  // answers.csv: every method's answer to every item, `correct` as exact match, summing to the
  // method's accuracy in results.csv.
  std::map<std::string, int> right, rows_seen;
  std::stringstream answers(read_all(out + "/answers.csv"));
  std::getline(answers, line);
  EXPECT_EQ(line, "model,method,item,line,n_frames,type,question,expected,answer,correct");
  while (std::getline(answers, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    ASSERT_EQ(f.size(), 10u) << line;
    EXPECT_EQ(f[9], f[8] == f[7] ? "1" : "0") << line;
    right[f[1]] += f[9] == "1";
    ++rows_seen[f[1]];
  }
  std::stringstream results(read_all(out + "/results.csv"));
  std::getline(results, line);
  while (std::getline(results, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    ASSERT_GE(f.size(), 12u) << line;
    EXPECT_EQ(rows_seen[f[1]], 4) << line;
    EXPECT_DOUBLE_EQ(std::stod(f[11]), right[f[1]] / 4.0) << line;
  }
  std::filesystem::remove_all(dir);
}

TEST(EvalVqaItems, AMissingFrameNamesItsLine) {
  const std::string dir = temp_dir("vqa_eval_missing");
  const std::string items = write_items(
      dir, R"({"frames": ["nope0.png", "nope1.png"], "question": "Q", "answer": "A"})" "\n");
  const std::string models = std::string(VLKV_SOURCE_DIR) + "/models/";
  const auto r = testing_cli::run_cli({"eval", "-m", models + "tinyvlm-shapes.gguf", "--mmproj",
                                       models + "tinyvlm-shapes-mmproj.gguf", "--vqa", items, "--kv", "f16"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("items.jsonl:1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nope0.png"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vlkv::cli
