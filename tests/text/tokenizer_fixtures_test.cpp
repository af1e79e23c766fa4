// The tokenizer against llama.cpp's golden runs: prompt token ids of every text fixture
// (BOS added, no special parsing), prompt pieces, the bytes of the generated text, round
// trips, and the text chunks of the idefics3 VLM run (special tokens parsed).
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf_reader.h"
#include "text/tokenizer.h"

namespace vlkv {
namespace {

namespace fs = std::filesystem;
const fs::path kFixtures = fs::path(VLKV_TEST_DATA) / "fixtures";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string to_hex(const std::string& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

// One tokenizer per model file (the GgufFile must outlive nothing: the tokenizer copies).
const Tokenizer& tokenizer_for(const std::string& model) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(model);
  if (it == cache.end()) {
    auto gguf = GgufFile::open((kFixtures / "models" / (model + ".gguf")).string());
    EXPECT_TRUE(gguf.is_ok()) << model << ": " << gguf.status().message();
    if (!gguf.is_ok()) std::abort();
    auto tok = Tokenizer::from_gguf(*gguf.value());
    EXPECT_TRUE(tok.is_ok()) << model << ": " << tok.status().message();
    if (!tok.is_ok()) std::abort();
    it = cache.emplace(model, std::move(tok).value()).first;
  }
  return *it->second;
}

// The model file a fixture directory names ("<model>-deq" runs use "<model>").
std::string model_of(std::string dir) {
  if (!fs::exists(kFixtures / "models" / (dir + ".gguf")) && dir.size() > 4 && dir.ends_with("-deq")) {
    dir.resize(dir.size() - 4);
  }
  return dir;
}

TEST(TokenizerFixtures, PromptTokensPiecesAndGeneratedText) {
  int n_files = 0;
  for (const auto& model_dir : fs::directory_iterator(kFixtures / "text")) {
    const fs::path run_dir = model_dir.path() / "kv-f32_fa-off";
    if (!fs::is_directory(run_dir)) continue;
    const std::string model = model_of(model_dir.path().filename().string());
    const Tokenizer& tok = tokenizer_for(model);
    for (const auto& entry : fs::directory_iterator(run_dir)) {
      if (entry.path().extension() != ".json") continue;
      SCOPED_TRACE(entry.path().string());
      const auto json = nlohmann::json::parse(read_file(entry.path()));
      const std::string prompt = read_file(kFixtures / "prompts" / (entry.path().stem().string() + ".txt"));
      ASSERT_FALSE(prompt.empty());
      const auto ids = tok.encode(prompt, /*add_special=*/true, /*parse_special=*/false);
      EXPECT_EQ(ids, json.at("prompt_tokens").get<std::vector<TokenId>>());

      // The fixtures render pieces as llama.cpp's token_to_piece(special=true): control and
      // unknown tokens show their text; token_to_piece (special=false) renders them as "".
      const auto piece_special = [&](TokenId id) {
        const TokenType type = tok.token_type(id);
        if (type == TokenType::kControl || type == TokenType::kUnknown) {
          EXPECT_EQ(tok.token_to_piece(id), "");
          return std::string(tok.token_text(id));
        }
        return tok.token_to_piece(id);
      };
      const auto pieces = json.at("prompt_pieces").get<std::vector<std::string>>();
      ASSERT_EQ(pieces.size(), ids.size());
      for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(piece_special(ids[i]), pieces[i]) << i;

      std::string generated;
      for (TokenId id : json.at("generated_tokens").get<std::vector<TokenId>>()) generated += piece_special(id);
      EXPECT_EQ(to_hex(generated), json.at("generated_text_hex").get<std::string>());

      // Round trip: BOS renders as nothing, so the SPM space prefix stays in the text.
      EXPECT_EQ(tok.decode(ids), " " + prompt);
      ++n_files;
    }
  }
  EXPECT_GE(n_files, 40);
  std::printf("[ fixtures ] %d text runs checked\n", n_files);
}

TEST(TokenizerFixtures, SpmRoundTripWithoutBos) {
  const Tokenizer& tok = tokenizer_for("stories260K");
  for (const std::string s : {"Once upon a time", "  two leading spaces", "tabs\tand\nnewlines\n\n",
                              "unicode: \xC3\x84pfel \xF0\x9F\xA6\x99 caf\xC3\xA9", "", " "}) {
    const auto ids = tok.encode(s, /*add_special=*/false, /*parse_special=*/false);
    // llama_detokenize strips the one space the tokenizer added in front.
    EXPECT_EQ(tok.decode(ids), s) << s;
  }
}

TEST(TokenizerFixtures, SpmBasics) {
  const Tokenizer& tok = tokenizer_for("stories260K");
  EXPECT_EQ(tok.model_name(), "llama");
  EXPECT_EQ(tok.n_vocab(), 512);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_TRUE(tok.is_end_of_generation(2));
  EXPECT_FALSE(tok.is_end_of_generation(1));
  EXPECT_EQ(tok.token_to_piece(1), "");  // control
  EXPECT_EQ(tok.token_to_piece(13), "\n");  // <0x0A>
  EXPECT_EQ(tok.token_type(13), TokenType::kByte);
  EXPECT_EQ(tok.find_token("<0x0A>"), 13);
  EXPECT_EQ(tok.find_token("no such piece"), -1);
  // "<s>" is a control token: plain text unless special tokens are parsed.
  EXPECT_EQ(tok.encode("<s>", false, true), (std::vector<TokenId>{1}));
  EXPECT_NE(tok.encode("<s>", false, false), (std::vector<TokenId>{1}));
  EXPECT_EQ(tok.encode("", true, false), (std::vector<TokenId>{1}));
  EXPECT_TRUE(tok.encode("", false, false).empty());
}

// libmtmd tokenizes each text chunk of the idefics3 prompt on its own with special tokens parsed.
TEST(TokenizerFixtures, Idefics3TextChunks) {
  const Tokenizer& tok = tokenizer_for("stories260K-idefics3-text");
  const auto json = nlohmann::json::parse(read_file(kFixtures / "vlm/idefics3/kv-f32_fa-off/vlm_p1.json"));
  const auto positions = json.at("position_tokens").get<std::vector<TokenId>>();
  const auto first = tok.encode("Once upon a time, there was a picture:<fake_token_around_image><row_1_col_1>", true, true);
  ASSERT_LE(first.size(), positions.size());
  EXPECT_EQ(first, std::vector<TokenId>(positions.begin(), positions.begin() + first.size()));
  const auto last = tok.encode("<fake_token_around_image>It showed a", false, true);
  ASSERT_LE(last.size(), positions.size());
  EXPECT_EQ(last, std::vector<TokenId>(positions.end() - last.size(), positions.end()));
  EXPECT_EQ(tok.encode("\n\n", false, true), (std::vector<TokenId>{512}));
}

// libmtmd's lookup_token finds media framing tokens by their rendered piece (specials as
// their text) instead of tokenizing them: tokenizing "\n" gives SPM's "▁" an extra position.
TEST(TokenizerFixtures, FindTokenByPieceIsLibmtmdsLookup) {
  const Tokenizer& tok = tokenizer_for("stories260K-idefics3-text");
  EXPECT_EQ(tok.find_token_by_piece("\n"), 13);  // the byte token <0x0A>
  EXPECT_EQ(tok.encode("\n", false, true), (std::vector<TokenId>{410, 13}));  // "▁" "\n"
  EXPECT_EQ(tok.find_token_by_piece("\n\n"), 512);
  EXPECT_EQ(tok.find_token_by_piece("<fake_token_around_image>"), 513);
  EXPECT_EQ(tok.find_token_by_piece("<global-img>"), 514);
  EXPECT_EQ(tok.find_token_by_piece("<row_2_col_2>"), 518);
  EXPECT_EQ(tok.find_token_by_piece("<s>"), 1);    // control: rendered as its text
  EXPECT_EQ(tok.find_token_by_piece(" a"), 261);   // normal "▁a"
  EXPECT_EQ(tok.find_token_by_piece("<row_3_col_1>"), -1);
  EXPECT_EQ(tok.find_token_by_piece(""), -1);  // no token renders as nothing but controls (own text)
  const Tokenizer& bpe = tokenizer_for("../tokenizers/ggml-vocab-gpt-2");
  EXPECT_EQ(bpe.find_token_by_piece("\n"), 198);  // byte-level "Ċ"
}

}  // namespace
}  // namespace vlkv
