// Tokenizer rules on small hand-built vocabularies: special-token splitting (longest
// first, control only with parse_special, user-defined always), end-of-generation set,
// BOS/EOS defaults per model type, SPM merging by score with byte fallback and unk,
// BPE merges by rank, detokenizer clean-up, and the errors from_gguf reports.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "text/tokenizer.h"
#include "text/tokenizer_vocab.h"
#include "text/unicode.h"

namespace vlkv {
namespace {

using Ids = std::vector<TokenId>;
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6;

// Byte-level vocabulary: id b is byte b, then specials and two merged pieces.
VocabSpec bpe_spec(const std::string& pre) {
  VocabSpec s;
  s.model = "gpt2";
  s.pre = pre;
  for (int b = 0; b < 256; ++b) s.tokens.push_back(unicode::byte_to_unicode(static_cast<uint8_t>(b)));
  s.token_types.assign(256, kNormal);
  const std::pair<const char*, int32_t> extra[] = {
      {"<|endoftext|>", kControl}, {"<|im_start|>", kControl}, {"<|im_end|>", kControl}, {"<tool>", kUserDefined},
      {"<|a|>", kControl},         {"<|a|><|b|>", kControl},   {"\xC4\xA0hi", kNormal}, {"\xC4\xA0h", kNormal},
  };
  for (const auto& [text, type] : extra) {
    s.tokens.push_back(text);
    s.token_types.push_back(type);
  }
  s.merges = {"\xC4\xA0 h", "\xC4\xA0h i"};
  s.eos_id = 256;
  return s;
}

std::unique_ptr<Tokenizer> make(const VocabSpec& spec) {
  auto tok = make_tokenizer(spec);
  EXPECT_TRUE(tok.is_ok()) << tok.status().message();
  return tok.is_ok() ? std::move(tok).value() : nullptr;
}

// Byte ranges a client typed (vlkv serve's message text) are plain text: a special token's
// text inside one, or reaching into one, is bytes; outside them special tokens are parsed.
TEST(TokenizerSpecial, PlainSpansAreNeverSpecialTokens) {
  auto tok = make(bpe_spec("qwen2"));
  ASSERT_TRUE(tok);
  const std::string text = "<|im_start|>user\n<|im_end|>x<|im_end|>";
  const std::vector<std::pair<size_t, size_t>> message = {{17, 28}};  // "<|im_end|>x"
  const Ids ids = tok->encode(text, false, true, message);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 257);
  EXPECT_EQ(ids.back(), 258);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 258), 1) << "the typed <|im_end|> became the special token";
  EXPECT_EQ(tok->decode(ids), "user\n<|im_end|>x");  // the control tokens render as nothing
  const std::vector<std::pair<size_t, size_t>> straddling = {{20, 21}};  // one byte inside it
  const Ids s = tok->encode(text, false, true, straddling);
  EXPECT_EQ(std::count(s.begin(), s.end(), 258), 1);
}

TEST(TokenizerSpecial, SplitsControlAndUserDefinedTokens) {
  auto tok = make(bpe_spec("qwen2"));
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("<|im_start|>user\n hi<|im_end|>", false, true),
            (Ids{257, 'u', 's', 'e', 'r', '\n', 262, 258}));
  // Without parse_special control texts are plain text; user-defined tokens still match.
  const Ids plain = tok->encode("<|im_start|>", false, false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(tok->decode(plain), "<|im_start|>");
  EXPECT_EQ(tok->encode("a<tool>b", false, false), (Ids{'a', 259, 'b'}));
  // Longest special text first.
  EXPECT_EQ(tok->encode("<|a|><|b|>", false, true), (Ids{261}));
  EXPECT_EQ(tok->encode("<|a|>x<|a|>", false, true), (Ids{260, 'x', 260}));
}

TEST(TokenizerSpecial, EndOfGenerationAndPieces) {
  auto tok = make(bpe_spec("qwen2"));
  ASSERT_TRUE(tok);
  EXPECT_TRUE(tok->is_end_of_generation(256));   // eos, and <|endoftext|> by text
  EXPECT_TRUE(tok->is_end_of_generation(258));   // <|im_end|> by text
  EXPECT_FALSE(tok->is_end_of_generation(257));
  EXPECT_FALSE(tok->is_end_of_generation(-1));
  EXPECT_EQ(tok->token_to_piece(257), "");        // control
  EXPECT_EQ(tok->token_to_piece(259), "<tool>");  // user-defined
  EXPECT_EQ(tok->token_to_piece(262), " hi");     // byte-level "Ġhi"
  EXPECT_EQ(tok->token_type(258), TokenType::kControl);
  EXPECT_EQ(tok->model_name(), "gpt2");
  EXPECT_EQ(tok->eos(), 256);
  // BPE adds no BOS unless the metadata asks (llama.cpp's default for gpt2 vocabularies).
  EXPECT_EQ(tok->encode("hi", true, false), (Ids{'h', 'i'}));
  EXPECT_EQ(tok->encode(" hi", true, false), (Ids{262}));
}

TEST(TokenizerSpecial, BosRules) {
  VocabSpec spec = bpe_spec("llama3");  // llama3 family adds BOS by default
  spec.bos_id = 257;
  auto tok = make(spec);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("hi", true, false).front(), 257);
  spec.add_bos = false;
  EXPECT_EQ(make(spec)->encode("hi", true, false).front(), 'h');
  VocabSpec eos = bpe_spec("qwen2");
  eos.add_eos = true;
  EXPECT_EQ(make(eos)->encode("hi", true, false).back(), 256);
}

TEST(TokenizerSpecial, CleanSpacesOnlyForGpt2Family) {
  auto gpt2 = make(bpe_spec("gpt-2"));
  auto qwen2 = make(bpe_spec("qwen2"));
  ASSERT_TRUE(gpt2 && qwen2);
  const std::string text = "a , b 's";
  EXPECT_EQ(gpt2->decode(gpt2->encode(text, false, false)), "a, b's");
  EXPECT_EQ(qwen2->decode(qwen2->encode(text, false, false)), text);
}

TEST(TokenizerSpecial, SpmScoresByteFallbackAndUnk) {
  VocabSpec s;
  s.model = "llama";
  s.tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab", "<0x7A>"};
  s.scores = {0, 0, 0, -5, -3, -3, 1, 2, 0};
  s.token_types = {kUnknown, kControl, kControl, kNormal, kNormal, kNormal, kNormal, kNormal, kByte};
  auto tok = make(s);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("ab", false, false), (Ids{3, 7}));    // "ab" outscores "▁a"
  EXPECT_EQ(tok->encode("a", true, false), (Ids{1, 6}));      // SPM adds BOS by default
  EXPECT_EQ(tok->encode("z", false, false), (Ids{3, 8}));     // byte fallback <0x7A>
  EXPECT_EQ(tok->encode("q", false, false), (Ids{3, 0}));     // neither piece nor byte: unk
  EXPECT_EQ(tok->token_to_piece(8), "z");
  EXPECT_EQ(tok->token_to_piece(6), " a");
  EXPECT_EQ(tok->token_to_piece(0), "");
  EXPECT_EQ(tok->decode({6, 7}), "aab");       // leading space of the first piece removed
  EXPECT_EQ(tok->decode({1, 6, 7}), " aab");   // ... unless a (silent) BOS comes first
  EXPECT_TRUE(tok->is_end_of_generation(2));
  EXPECT_EQ(tok->encode("<s>a", false, true), (Ids{1, 6}));  // space prefix after a special token
  s.add_space_prefix = false;
  EXPECT_EQ(make(s)->encode("ab", false, false), (Ids{7}));
}

TEST(TokenizerSpecial, Errors) {
  VocabSpec bad = bpe_spec("no-such-pre");
  EXPECT_EQ(make_tokenizer(bad).status().code(), StatusCode::kUnsupported);
  bad = bpe_spec("qwen2");
  bad.model = "bert";
  EXPECT_EQ(make_tokenizer(bad).status().code(), StatusCode::kUnsupported);
  bad = bpe_spec("qwen2");
  bad.tokens[1] = bad.tokens[0];
  EXPECT_EQ(make_tokenizer(bad).status().code(), StatusCode::kInvalidFile);
  bad = bpe_spec("qwen2");
  bad.merges.clear();
  EXPECT_EQ(make_tokenizer(bad).status().code(), StatusCode::kInvalidFile);
  bad = bpe_spec("qwen2");
  bad.token_types.resize(10);
  EXPECT_EQ(make_tokenizer(bad).status().code(), StatusCode::kInvalidFile);
}

}  // namespace
}  // namespace vlkv
