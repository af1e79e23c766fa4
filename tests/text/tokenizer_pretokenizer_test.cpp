// Pre-tokenizer splits (hand-checked against the regexes' meaning), the \s rewrite and
// the unicode helpers. The fixtures have no qwen2 or llama3 vocabulary, so these are
// the tests for those families.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "text/tokenizer_bpe.h"
#include "text/unicode.h"
#include "text/unicode_regex.h"

namespace vlkv {
namespace {

using Words = std::vector<std::string>;

Words split(const std::string& pre, const std::string& text) {
  auto config = pre_tokenizer_config(pre);
  EXPECT_TRUE(config.is_ok()) << pre;
  auto splitter = RegexSplitter::create(config.value().patterns);
  EXPECT_TRUE(splitter.is_ok()) << splitter.status().message();
  return splitter.value()->split(unicode::sanitize_utf8(text));
}

const std::string kText = "Hello world's 12345 test!!\n\n  x";

TEST(PreTokenizer, Llama3) {
  EXPECT_EQ(split("llama3", kText),
            (Words{"Hello", " world", "'s", " ", "123", "45", " test", "!!\n\n", " ", " x"}));
  EXPECT_EQ(split("llama-bpe", "I'M HERE'LL"), (Words{"I", "'M", " HERE", "'LL"}));  // contractions ignore case
  EXPECT_EQ(split("llama3", "1234567"), (Words{"123", "456", "7"}));
  EXPECT_EQ(split("llama3", "a\r\n\r\nb"), (Words{"a", "\r\n\r\n", "b"}));
  EXPECT_EQ(split("llama3", "(x) .."), (Words{"(x", ")", " .."}));
  EXPECT_EQ(split("llama3", "caf\xC3\xA9 \xE6\x88\x91\xE6\x83\xB3" "apple"),
            (Words{"caf\xC3\xA9", " \xE6\x88\x91\xE6\x83\xB3" "apple"}));
}

TEST(PreTokenizer, Qwen2) {
  EXPECT_EQ(split("qwen2", kText),
            (Words{"Hello", " world", "'s", " ", "1", "2", "3", "4", "5", " test", "!!\n\n", " ", " x"}));
  EXPECT_EQ(split("qwen2", "I'M"), (Words{"I", "'M"}));
  EXPECT_EQ(split("qwen2", "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple\xE5\xB7\xA5\xE4\xBD\x9C" "1314"),
            (Words{"\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple\xE5\xB7\xA5\xE4\xBD\x9C", "1", "3", "1", "4"}));
  EXPECT_EQ(split("qwen2", "<|im_start|>user"), (Words{"<|", "im", "_start", "|>", "user"}));
}

TEST(PreTokenizer, Gpt2AndStarcoder) {
  EXPECT_EQ(split("gpt-2", kText), (Words{"Hello", " world", "'s", " 12345", " test", "!!", "\n\n ", " x"}));
  EXPECT_EQ(split("gpt-2", "I'M"), (Words{"I", "'", "M"}));  // GPT-2's contractions are lower case only
  EXPECT_EQ(split("starcoder", kText),
            (Words{"Hello", " world", "'s", " ", "1", "2", "3", "4", "5", " test", "!!", "\n\n ", " x"}));
  EXPECT_EQ(split("smollm", "a1b"), (Words{"a", "1", "b"}));
}

TEST(PreTokenizer, DefaultPre) {
  // "default": punctuation runs first, then GPT-2, then digit runs, then digit triples.
  EXPECT_EQ(split("default", "hi, 12345!"), (Words{"hi", ",", " ", "123", "45", "!"}));
}

TEST(PreTokenizer, WhitespaceIsUnicodeWhiteSpace) {
  // U+0085 (NEL) is White_Space for llama.cpp; PCRE2's own \s would miss it.
  EXPECT_EQ(split("gpt-2", " \xC2\x85" "b"), (Words{" ", "\xC2\x85", "b"}));
  EXPECT_EQ(split("gpt-2", "a\xE3\x80\x80" "b"), (Words{"a", "\xE3\x80\x80", "b"}));  // U+3000
  const std::string expanded = expand_whitespace_classes("a\\sb");
  EXPECT_EQ(expanded.substr(0, 4), "a[\\t");
  EXPECT_EQ(expanded.substr(expanded.size() - 2), "]b");
  EXPECT_EQ(expand_whitespace_classes("[^\\s\\p{L}]").find("\\s"), std::string::npos);
  EXPECT_EQ(expand_whitespace_classes("\\S").substr(0, 2), "[^");
}

TEST(PreTokenizer, UnknownPreIsUnsupported) {
  auto config = pre_tokenizer_config("no-such-pre");
  ASSERT_FALSE(config.is_ok());
  EXPECT_EQ(config.status().code(), StatusCode::kUnsupported);
  EXPECT_TRUE(pre_tokenizer_config("").is_ok());  // missing key: llama.cpp's "default"
}

TEST(PreTokenizer, PiecesConcatenateBack) {
  const std::string text = "  mixed \t text\n\n with 123 numbers, \xF0\x9F\xA6\x99 emoji and \xD0\xBD\xD0\xB5 Cyrillic  ";
  for (const char* pre : {"default", "gpt-2", "starcoder", "qwen2", "llama3"}) {
    std::string joined;
    for (const auto& w : split(pre, text)) {
      EXPECT_FALSE(w.empty()) << pre;
      joined += w;
    }
    EXPECT_EQ(joined, text) << pre;
  }
}

TEST(Unicode, Utf8AndByteAlphabet) {
  EXPECT_EQ(unicode::utf8_len('a'), 1u);
  EXPECT_EQ(unicode::utf8_len('\xC3'), 2u);
  EXPECT_EQ(unicode::utf8_len('\xE2'), 3u);
  EXPECT_EQ(unicode::utf8_len('\xF0'), 4u);
  EXPECT_EQ(unicode::utf8_to_cpts("a\xC3\xA9\xF0\x9F\xA6\x99"), (std::vector<uint32_t>{'a', 0xE9, 0x1F999}));
  EXPECT_EQ(unicode::sanitize_utf8("a\xFF" "b\xC3"), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  EXPECT_EQ(unicode::byte_to_unicode(' '), "\xC4\xA0");   // 'Ġ'
  EXPECT_EQ(unicode::byte_to_unicode('\n'), "\xC4\x8A");  // 'Ċ'
  EXPECT_EQ(unicode::byte_to_unicode('A'), "A");
  for (int b = 0; b < 256; ++b) EXPECT_EQ(unicode::unicode_to_byte(unicode::byte_to_unicode(b)), b);
  EXPECT_EQ(unicode::unicode_to_byte("\xE2\x96\x81"), -1);
  EXPECT_TRUE(unicode::is_whitespace(0x85));
  EXPECT_TRUE(unicode::is_whitespace(0x2007));
  EXPECT_FALSE(unicode::is_whitespace(0x200B));
}

}  // namespace
}  // namespace vlkv
