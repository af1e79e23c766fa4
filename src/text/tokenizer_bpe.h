// Byte-level BPE ("gpt2" vocabularies) as llama.cpp's llm_tokenizer_bpe: a
// pre-tokenizer regex chosen by tokenizer.ggml.pre splits the text into words, each
// word is mapped to GPT-2's byte alphabet, then merged by rank.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tokenizer_vocab.h"
#include "text/unicode_regex.h"

namespace vlkv {

// What tokenizer.ggml.pre selects (llama.cpp's pre_type and its side effects).
struct PreTokenizerConfig {
  std::vector<std::string> patterns;  // applied in order (RegexSplitter)
  bool ignore_merges = false;         // a word that is a whole vocabulary entry skips merging
  bool clean_spaces = true;           // detokenizer space cleanup
  bool force_add_bos = false;         // llama3 family: add BOS unless metadata says otherwise
};

// Known names: "default", gpt-2 family ("gpt-2", "phi-2", "mpt", "olmo", ...), starcoder
// family ("starcoder", "smollm", "refact", "codeshell", ...), qwen2 family ("qwen2",
// "deepseek-r1-qwen", "stablelm2", "megrez", ...), llama3 family ("llama3", "llama-bpe",
// "llama-v3", "dbrx", "smaug-bpe", ...). An empty name means "default" (llama.cpp warns
// the same). Any other name is Unsupported: a wrong split silently changes every prompt,
// so we refuse rather than guess.
Result<PreTokenizerConfig> pre_tokenizer_config(std::string_view pre);

class BpeModel {
 public:
  static Result<std::unique_ptr<BpeModel>> create(const Vocab& vocab, const std::vector<std::string>& merges,
                                                  const PreTokenizerConfig& config);

  // Appends the tokens of one raw-text fragment (no special tokens in it).
  void tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>* out) const;

  // Merge rank of a pair of byte-encoded pieces, -1 if they never merge.
  int rank(std::string_view left, std::string_view right) const;

  // The byte-level words the pre-tokenizer makes of `text` (before merging), for tests.
  std::vector<std::string> pre_tokenize(std::string_view text) const;

 private:
  BpeModel() = default;
  std::unique_ptr<RegexSplitter> splitter_;
  bool ignore_merges_ = false;
  std::unordered_map<std::string, int> ranks_;  // "left right" -> rank
};

}  // namespace vlkv
