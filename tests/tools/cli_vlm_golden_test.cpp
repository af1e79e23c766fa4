// `vlkv run --image …` against llama.cpp for every VLM family in the fixtures: the prompt
// the CLI builds (Engine::user_prompt + prepare_prompt, as cmd_run calls them) must have
// llama.cpp's chunk list — token ids, image runs, start positions — and the greedy text
// from Session::generate and from the vlkv executable must be llama.cpp's.
// idefics3 (SmolVLM) and qwen2vl: tests/data/fixtures/vlm (libmtmd's chunks in the JSON);
// the LLaVA-style tinyvlm: tests/data/vlm/tinyvlm (mtmd prompt ids and answers).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"
#include "vision/qwen2vl_positions.h"
#include "vlkv/engine.h"

namespace vlkv {
namespace {

std::string fixtures() { return std::string(VLKV_TEST_DATA) + "/fixtures"; }
std::string tinyvlm_dir() { return std::string(VLKV_TEST_DATA) + "/vlm/tinyvlm"; }

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// One chunk in llama.cpp's JSON form (tokens empty for an image).
struct ChunkView {
  std::string type;  // "text" or "image"
  int64_t pos_start = 0;
  int64_t n_tokens = 0;
  std::vector<int32_t> tokens;
  bool operator==(const ChunkView&) const = default;
};

void PrintTo(const ChunkView& c, std::ostream* os) {
  *os << "{" << c.type << " @" << c.pos_start << " n=" << c.n_tokens;
  for (int32_t t : c.tokens) *os << " " << t;
  *os << "}";
}

std::vector<ChunkView> llama_chunks(const nlohmann::json& j) {
  std::vector<ChunkView> out;
  for (const nlohmann::json& c : j["chunks"]) {
    ChunkView v{c["type"], c["pos_start"], c["n_tokens"], {}};
    if (v.type == "text") v.tokens = c["tokens"].get<std::vector<int32_t>>();
    out.push_back(v);
  }
  return out;
}

// Our chunks with the positions the session gives them: text and llama-style media advance
// by their token count, Qwen2-VL media by max(grid) (M-RoPE).
std::vector<ChunkView> our_chunks(const PreparedPrompt& p, bool mrope) {
  std::vector<ChunkView> out;
  int64_t pos = 0;
  for (const PromptChunk& c : p.chunks) {
    const bool media = c.kind == PromptChunk::Kind::kMedia;
    out.push_back({media ? "image" : "text", pos, c.n_tokens, media ? std::vector<int32_t>{} : c.tokens});
    pos += media && mrope ? qwen2vl_visual_n_pos(c.grid_t, c.grid_h, c.grid_w) : c.n_tokens;
  }
  return out;
}

std::unique_ptr<Engine> load(const std::string& model, const std::string& mmproj, const std::string& kv) {
  EngineParams p;
  p.model_path = model;
  p.mmproj_path = mmproj;
  p.kv_method = kv;
  p.kv_budget_bytes = 64ull << 20;
  p.n_threads = 2;
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

Image load_or_fail(const std::string& path) {
  Result<Image> img = load_image(path);
  EXPECT_TRUE(img.is_ok()) << path << ": " << img.status().message();
  return img.is_ok() ? std::move(img).value() : Image{};
}

// Greedy generation through Session::generate, as `vlkv run --temp 0` does.
std::string generate(Engine& e, const Prompt& prompt, int64_t n, bool ignore_eos, GenerateStats* stats) {
  Result<std::unique_ptr<Session>> s = e.new_session();
  EXPECT_TRUE(s.is_ok());
  if (!s.is_ok()) return {};
  GenerateParams g;
  g.max_tokens = n;
  g.ignore_eos = ignore_eos;
  g.sampling.temperature = 0;
  std::string text;
  const Status st = (*s)->generate(prompt, g, [&](const std::string& piece) { text += piece; return true; }, stats);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return text;
}

// "vlkv: ... | 56 prompt tokens (20 visual, ..." -> 56; -1 if absent.
int64_t reported_prompt_tokens(const std::string& err) {
  const size_t at = err.find(" prompt tokens");
  if (at == std::string::npos) return -1;
  size_t b = at;
  while (b > 0 && std::isdigit(static_cast<unsigned char>(err[b - 1]))) --b;
  return b == at ? -1 : std::stoll(err.substr(b, at - b));
}

// A fixture pair of libmtmd's runs (tests/data/fixtures/vlm/<pair>/kv-f32_fa-off/<prompt>.json).
struct FixturePair {
  const char* name;
  const char* text_model;
  const char* mmproj;
  const char* run;     // <pair>/kv-f32_fa-off/<prompt>
  const char* prompt;  // prompts/<prompt>.txt
  bool mrope;
};

void PrintTo(const FixturePair& p, std::ostream* os) { *os << p.name; }

const FixturePair kPairs[] = {
    {"idefics3", "stories260K-idefics3-text.gguf", "mmproj-tiny-idefics3.gguf", "idefics3/kv-f32_fa-off/vlm_p1",
     "vlm_p1", false},
    {"qwen2vl", "qwen2vl-tiny-text.gguf", "mmproj-tiny-qwen2vl.gguf", "qwen2vl/kv-f32_fa-off/vlm_q1", "vlm_q1", true},
};

class VlmRunGolden : public testing::TestWithParam<std::tuple<FixturePair, const char*>> {};

// The issue's command: vlkv run -m … --mmproj … --image test_image_64.png -p "$(cat <prompt>)"
//   -n 16 --temp 0 --ignore-eos --no-template
TEST_P(VlmRunGolden, PromptChunksAndGreedyTextMatchLlamaCpp) {
  const auto& [pair, kv] = GetParam();
  const nlohmann::json j = nlohmann::json::parse(read_file(fixtures() + "/vlm/" + pair.run + ".json"));
  const std::string model = fixtures() + "/models/" + pair.text_model;
  const std::string mmproj = fixtures() + "/models/" + pair.mmproj;
  const std::string image = fixtures() + "/images/test_image_64.png";
  const std::string text = read_file(fixtures() + "/prompts/" + pair.prompt + ".txt");
  const std::string expected_text = j["generated_text"];
  const int64_t n_positions = j["n_positions"];

  std::unique_ptr<Engine> e = load(model, mmproj, kv);
  ASSERT_NE(e, nullptr);
  const Prompt prompt = e->user_prompt(text, {MediaItem{{load_or_fail(image)}, false}}, /*use_template=*/false);
  Result<PreparedPrompt> prepared = e->prepare_prompt(prompt, /*add_bos=*/true);
  ASSERT_TRUE(prepared.is_ok()) << prepared.status().message();
  EXPECT_EQ(our_chunks(*prepared, pair.mrope), llama_chunks(j));
  EXPECT_EQ(prepared->n_tokens(), n_positions);
  EXPECT_EQ(prepared->n_visual_tokens(), j["n_image_tokens"].get<int64_t>());

  GenerateStats stats;
  EXPECT_EQ(generate(*e, prompt, 16, /*ignore_eos=*/true, &stats), expected_text);
  EXPECT_EQ(stats.n_prompt_tokens, n_positions);

  const testing_cli::CliResult r =
      testing_cli::run_cli({"run", "-m", model, "--mmproj", mmproj, "--image", image, "-p", text, "-n", "16", "--temp",
                            "0", "--ignore-eos", "--no-template", "--kv", kv, "-t", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected_text + "\n");
  EXPECT_EQ(reported_prompt_tokens(r.err), n_positions) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VlmRunGolden,
                         testing::Combine(testing::ValuesIn(kPairs), testing::Values("f32", "f16")),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" + std::get<1>(info.param);
                         });

// A w x h binary PPM (the loader reads PNM) with a deterministic colour pattern.
std::string write_ppm(int w, int h) {
  const std::string path = testing::TempDir() + "vlkv_idefics3_" + std::to_string(w) + "x" + std::to_string(h) + ".ppm";
  std::ofstream f(path, std::ios::binary);
  f << "P6\n" << w << " " << h << "\n255\n";
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const char px[3] = {static_cast<char>((x * 5 + y) & 255), static_cast<char>((y * 7) & 255),
                          static_cast<char>(((x ^ y) * 3) & 255)};
      f.write(px, 3);
    }
  }
  return path;
}

// Images that are neither square nor a multiple of the 32-pixel tile. The fixtures have no
// llama.cpp run for them, so the expected chunks are written out from libmtmd's algorithm:
// refined size = img_tool::calc_size_preserved_ratio(size, 32, longest_edge 64), i.e. scale
// min(64/w, 64/h), each side rounded up to a multiple of 32 -> a cols x rows grid; per tile
// "<fake_token_around_image><row_R_col_C>" (513, 515 + (R-1)*2 + C-1) then 4 embeddings; "\n" (13)
// after every row but the last; "\n\n" <fake> <global-img> (512 513 514), 4 embeddings, <fake>.
// 100x40: 64x25.6 -> 64x32, 2 cols x 1 row. 40x100: 25.6x64 -> 32x64, 1 col x 2 rows.
// The greedy text has no llama.cpp oracle here: the CLI and Session::generate must agree.
TEST(VlmRunGoldenIdefics3, NonSquareImagesGetLibmtmdsTileLayout) {
  const std::string model = fixtures() + "/models/stories260K-idefics3-text.gguf";
  const std::string mmproj = fixtures() + "/models/mmproj-tiny-idefics3.gguf";
  const std::string text = read_file(fixtures() + "/prompts/vlm_p1.txt");
  const std::vector<int32_t> head = {1, 403, 407, 261, 378, 432, 383, 286, 261, 282, 417, 429, 413, 425, 276, 467};
  const std::vector<int32_t> tail = {513, 359, 413, 262, 415, 327, 266, 261};  // <fake> " It showed a"
  auto with = [](std::vector<int32_t> a, std::vector<int32_t> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  struct Case {
    int w, h;
    std::vector<ChunkView> chunks;
  };
  const std::vector<Case> cases = {
      {100, 40,
       {{"text", 0, 18, with(head, {513, 515})}, {"image", 18, 4, {}}, {"text", 22, 2, {513, 516}},
        {"image", 24, 4, {}}, {"text", 28, 3, {512, 513, 514}}, {"image", 31, 4, {}}, {"text", 35, 8, tail}}},
      {40, 100,
       {{"text", 0, 18, with(head, {513, 515})}, {"image", 18, 4, {}}, {"text", 22, 3, {13, 513, 517}},
        {"image", 25, 4, {}}, {"text", 29, 3, {512, 513, 514}}, {"image", 32, 4, {}}, {"text", 36, 8, tail}}},
  };
  std::unique_ptr<Engine> e = load(model, mmproj, "f32");
  ASSERT_NE(e, nullptr);
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.w) + "x" + std::to_string(c.h));
    const std::string image = write_ppm(c.w, c.h);
    const Prompt prompt = e->user_prompt(text, {MediaItem{{load_or_fail(image)}, false}}, /*use_template=*/false);
    Result<PreparedPrompt> prepared = e->prepare_prompt(prompt, /*add_bos=*/true);
    ASSERT_TRUE(prepared.is_ok()) << prepared.status().message();
    EXPECT_EQ(our_chunks(*prepared, false), c.chunks);
    const int64_t n_positions = c.chunks.back().pos_start + c.chunks.back().n_tokens;
    EXPECT_EQ(prepared->n_tokens(), n_positions);

    GenerateStats stats;
    const std::string ours = generate(*e, prompt, 16, /*ignore_eos=*/true, &stats);
    EXPECT_EQ(stats.n_generated, 16);
    const testing_cli::CliResult r =
        testing_cli::run_cli({"run", "-m", model, "--mmproj", mmproj, "--image", image, "-p", text, "-n", "16",
                              "--temp", "0", "--ignore-eos", "--no-template", "--kv", "f32", "-t", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, ours + "\n");
    EXPECT_EQ(reported_prompt_tokens(r.err), n_positions) << r.err;
    std::remove(image.c_str());
  }
}

// mtmd_tokenize adds BOS last: at the front of the first text chunk, which for a prompt that
// starts with the image is the first tile's header (the empty text before the marker adds nothing);
// 56 positions of the fixture less its 15 text tokens after BOS.
TEST(VlmRunGoldenIdefics3, PromptStartingWithTheImageGetsBosBeforeTheTileHeader) {
  std::unique_ptr<Engine> e = load(fixtures() + "/models/stories260K-idefics3-text.gguf",
                                   fixtures() + "/models/mmproj-tiny-idefics3.gguf", "f32");
  ASSERT_NE(e, nullptr);
  const std::string image = fixtures() + "/images/test_image_64.png";
  const Prompt prompt = e->user_prompt("It showed a", {MediaItem{{load_or_fail(image)}, false}}, false);
  Result<PreparedPrompt> p = e->prepare_prompt(prompt, /*add_bos=*/true);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  ASSERT_GE(p->chunks.size(), 2u);
  EXPECT_EQ(our_chunks(*p, false)[0], (ChunkView{"text", 0, 3, {1, 513, 515}}));
  EXPECT_EQ(our_chunks(*p, false).back(), (ChunkView{"text", 33, 8, {513, 359, 413, 262, 415, 327, 266, 261}}));
}

// libmtmd refuses an idefics3 projector on a text model without its framing tokens; so do we,
// with a message naming the missing token (stories260K lacks "\n\n" and <global-img>).
TEST(VlmRunGoldenIdefics3, TextModelWithoutTheFramingTokensIsAClearError) {
  const testing_cli::CliResult r = testing_cli::run_cli(
      {"run", "-m", fixtures() + "/models/stories260K.gguf", "--mmproj", fixtures() + "/models/mmproj-tiny-idefics3.gguf",
       "--image", fixtures() + "/images/test_image_64.png", "-p", "A picture:", "-n", "4", "--no-template"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("no single token for '\\n\\n'"), std::string::npos) << r.err;
}

// tinyvlm-shapes (LLaVA-1.5 style, Vicuna template) as its README runs llama.cpp:
//   llama-mtmd-cli -m … --mmproj … --image IMG -p QUESTION --temp 0
// llama-mtmd-cli puts the marker in front of the user message before the template, so the
// image sits inside the USER turn (the reference prompt ids: BOS ▁U S E R : ▁ [144] ▁question…).
TEST(VlmRunGoldenTinyVlm, QuestionWithoutMarkerMatchesLlamaCpp) {
  const std::string model = std::string(VLKV_SOURCE_DIR) + "/models/tinyvlm-shapes.gguf";
  const std::string mmproj = std::string(VLKV_SOURCE_DIR) + "/models/tinyvlm-shapes-mmproj.gguf";
  std::unique_ptr<Engine> e = load(model, mmproj, "f16");
  ASSERT_NE(e, nullptr);
  std::ifstream f(tinyvlm_dir() + "/reference_outputs.jsonl");
  std::string line;
  for (int item = 0; item < 6 && std::getline(f, line); ++item) {
    const nlohmann::json it = nlohmann::json::parse(line);
    const std::string image = tinyvlm_dir() + "/" + it["image"].get<std::string>();
    const std::string question = it["question"];
    SCOPED_TRACE(question);
    const Prompt prompt = e->user_prompt(question, {MediaItem{{load_or_fail(image)}, false}}, /*use_template=*/true);
    Result<PreparedPrompt> prepared = e->prepare_prompt(prompt, /*add_bos=*/true);
    ASSERT_TRUE(prepared.is_ok()) << prepared.status().message();
    std::vector<int64_t> ids;  // the reference's notation: an image run is one entry -n_tokens
    for (const PromptChunk& c : prepared->chunks) {
      if (c.kind == PromptChunk::Kind::kMedia) ids.push_back(-c.n_tokens);
      else ids.insert(ids.end(), c.tokens.begin(), c.tokens.end());
    }
    const std::vector<int64_t> ref_ids = it["prompt_tokens"].get<std::vector<int64_t>>();
    EXPECT_EQ(ids, ref_ids);
    int64_t ref_positions = 0;
    for (int64_t id : ref_ids) ref_positions += id < 0 ? -id : 1;

    std::string answer;
    for (int32_t t : it["model_tokens"].get<std::vector<int32_t>>()) answer += e->token_to_piece(t);
    GenerateStats stats;
    EXPECT_EQ(generate(*e, prompt, 64, /*ignore_eos=*/false, &stats), answer);
    const testing_cli::CliResult r = testing_cli::run_cli(
        {"run", "-m", model, "--mmproj", mmproj, "--image", image, "-p", question, "--temp", "0", "-t", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, answer + "\n");
    EXPECT_EQ(reported_prompt_tokens(r.err), ref_positions) << r.err;
  }
}

}  // namespace
}  // namespace vlkv
