// The user-level golden check for the second fixture batch (tests/data/fixtures/README-batch2.md:
// LLaVA-NeXT, Qwen2.5-VL, Gemma 3, InternVL, Qwen3-VL), shared by one test file per family:
// `vlkv run -m TEXT --mmproj MMPROJ --image IMG -p "$(cat prompts/vlm_p1.txt)" -n 16 --temp 0
//  --ignore-eos --no-template` against vlm/<family>/kv-f32_fa-off/<run>.json.
//
// What must match llama.cpp:
// - the prompt the CLI builds (Engine::user_prompt + prepare_prompt): text token ids exactly,
//   each run of consecutive media chunks with the same token count and start position
//   (libmtmd splits LLaVA-NeXT / InternVL tiles into one chunk each; we may keep them as one),
//   and n_positions (stderr "N prompt tokens" too);
// - the greedy bytes, from Session::generate and from the executable, up to the first step whose
//   llama.cpp top-1 margin (generated_top1_margins) is below kNearTie: random weights have
//   near-ties that any reordering of a float sum may flip, and everything after a flip differs.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"
#include "vision/qwen2vl_positions.h"
#include "vlkv/engine.h"

namespace vlkv::batch2 {

inline constexpr double kNearTie = 0.05;

struct Family {
  const char* name;        // folder under fixtures/vlm
  const char* text_model;  // fixtures/models/...
  const char* mmproj;
  bool mrope;              // media chunks advance positions by max(grid) (Qwen-VL M-RoPE)
};

inline std::string fixtures() { return std::string(VLKV_TEST_DATA) + "/fixtures"; }

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// One chunk as compared: consecutive media chunks merged into one.
struct ChunkView {
  std::string type;  // "text" or "image"
  int64_t pos_start = 0;
  int64_t n_tokens = 0;
  std::vector<int32_t> tokens;
  bool operator==(const ChunkView&) const = default;
};

inline void PrintTo(const ChunkView& c, std::ostream* os) {
  *os << "{" << c.type << " @" << c.pos_start << " n=" << c.n_tokens;
  for (int32_t t : c.tokens) *os << " " << t;
  *os << "}";
}

inline void append_merged(std::vector<ChunkView>& out, ChunkView v) {
  if (v.type == "image" && !out.empty() && out.back().type == "image") {
    out.back().n_tokens += v.n_tokens;
    return;
  }
  out.push_back(std::move(v));
}

inline std::vector<ChunkView> llama_chunks(const nlohmann::json& j) {
  std::vector<ChunkView> out;
  for (const nlohmann::json& c : j["chunks"]) {
    ChunkView v{c["type"], c["pos_start"], c["n_tokens"], {}};
    if (v.type == "text") v.tokens = c["tokens"].get<std::vector<int32_t>>();
    append_merged(out, std::move(v));
  }
  return out;
}

inline std::vector<ChunkView> our_chunks(const PreparedPrompt& p, bool mrope) {
  std::vector<ChunkView> out;
  int64_t pos = 0;
  for (const PromptChunk& c : p.chunks) {
    const bool media = c.kind == PromptChunk::Kind::kMedia;
    append_merged(out, {media ? "image" : "text", pos, c.n_tokens, media ? std::vector<int32_t>{} : c.tokens});
    pos += media && mrope ? qwen2vl_visual_n_pos(c.grid_t, c.grid_h, c.grid_w, c.t_step) : c.n_tokens;
  }
  return out;
}

// "b65b" -> "\xb6\x5b".
inline std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// llama.cpp's greedy bytes up to (not including) the first near-tie step. The exact bytes
// come from generated_pieces_hex: generated_pieces holds JSON text, where a piece that is
// not valid UTF-8 on its own (a byte-fallback token) reads U+FFFD instead of its byte.
inline std::string trusted_prefix(const nlohmann::json& j) {
  const auto pieces = j["generated_pieces_hex"].get<std::vector<std::string>>();
  const auto margins = j["generated_top1_margins"].get<std::vector<double>>();
  std::string out;
  for (size_t i = 0; i < pieces.size() && i < margins.size() && margins[i] >= kNearTie; ++i) out += from_hex(pieces[i]);
  return out;
}

// "vlkv: ... | 56 prompt tokens (20 visual, ..." -> 56; -1 if absent.
inline int64_t reported_prompt_tokens(const std::string& err) {
  const size_t at = err.find(" prompt tokens");
  if (at == std::string::npos) return -1;
  size_t b = at;
  while (b > 0 && std::isdigit(static_cast<unsigned char>(err[b - 1]))) --b;
  return b == at ? -1 : std::stoll(err.substr(b, at - b));
}

// run: "vlm_p1" or "vlm_p1_wide"; kv: any registered KV method spec ("f32" for the golden bytes).
inline void expect_run_matches_llama_cpp(const Family& fam, const std::string& run, const std::string& kv = "f32") {
  const nlohmann::json j =
      nlohmann::json::parse(read_file(fixtures() + "/vlm/" + fam.name + "/kv-f32_fa-off/" + run + ".json"));
  const std::string model = fixtures() + "/models/" + fam.text_model;
  const std::string mmproj = fixtures() + "/models/" + fam.mmproj;
  const std::string image = fixtures() + "/images/" + j["image"].get<std::string>();
  const std::string text = read_file(fixtures() + "/prompts/vlm_p1.txt");
  const int64_t n_positions = j["n_positions"];
  const std::string expected = trusted_prefix(j);

  EngineParams p;
  p.model_path = model;
  p.mmproj_path = mmproj;
  p.kv_method = kv;
  p.kv_budget_bytes = 64ull << 20;
  p.n_threads = 2;
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  Result<Image> img = load_image(image);
  ASSERT_TRUE(img.is_ok()) << image << ": " << img.status().message();

  const Prompt prompt = (*e)->user_prompt(text, {MediaItem{{*img}, false}}, /*use_template=*/false);
  Result<PreparedPrompt> prepared = (*e)->prepare_prompt(prompt, /*add_bos=*/true);
  ASSERT_TRUE(prepared.is_ok()) << prepared.status().message();
  EXPECT_EQ(our_chunks(*prepared, fam.mrope), llama_chunks(j));
  EXPECT_EQ(prepared->n_visual_tokens(), j["n_image_tokens"].get<int64_t>());

  Result<std::unique_ptr<Session>> s = (*e)->new_session();
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  GenerateParams g;
  g.max_tokens = 16;
  g.ignore_eos = true;
  g.sampling.temperature = 0;
  std::string got;
  GenerateStats stats;
  const Status st = (*s)->generate(prompt, g, [&](const std::string& piece) { got += piece; return true; }, &stats);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(stats.n_prompt_tokens, n_positions);
  EXPECT_EQ(got.substr(0, expected.size()), expected) << "llama.cpp: " << j["generated_text"].get<std::string>();

  const testing_cli::CliResult r =
      testing_cli::run_cli({"run", "-m", model, "--mmproj", mmproj, "--image", image, "-p", text, "-n", "16", "--temp",
                            "0", "--ignore-eos", "--no-template", "--kv", kv, "-t", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, expected.size()), expected) << r.err;
  EXPECT_EQ(reported_prompt_tokens(r.err), n_positions) << r.err;
}

}  // namespace vlkv::batch2
