// The vocabulary behind a Tokenizer: tokenizer.ggml.* metadata (VocabSpec), the
// finished table with llama.cpp's token attributes, special ids and end-of-generation
// set (Vocab), and the split of raw text at special-token texts.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <span>
#include <string_view>
#include <utility>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gguf/gguf_reader.h"
#include "text/tokenizer.h"
#include "vlkv/status.h"

namespace vlkv {

// llama.cpp's llama_token_attr bit flags (a token may carry several).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrNormalized = 1u << 6,
  kAttrLstrip = 1u << 7,   // special-token match eats whitespace on its left
  kAttrRstrip = 1u << 8,   // ... and on its right
};

enum class VocabKind { kSpm, kBpe };

// The tokenizer metadata as stored. read_vocab_spec fills it from a GGUF; tests build
// small ones by hand. Optional fields are absent keys (the model's defaults apply).
struct VocabSpec {
  std::string model;         // tokenizer.ggml.model: "llama" or "gpt2"
  std::string pre;           // tokenizer.ggml.pre ("" if absent)
  std::string general_name;  // general.name (llama.cpp keys a phi-3 rule on it)
  std::vector<std::string> tokens;    // [n_vocab]
  std::vector<float> scores;          // [n_vocab] or empty (all 0)
  std::vector<int32_t> token_types;   // [n_vocab] TokenType values, or empty (all normal)
  std::vector<std::string> merges;    // BPE: "left right", rank = index
  std::optional<int64_t> bos_id, eos_id, eot_id, eom_id, unk_id, fim_pad_id, fim_rep_id, fim_sep_id;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

// NotFound without tokenizer.ggml.model / tokens (or model "none"), InvalidFile for
// mistyped keys or arrays shorter than the vocabulary.
Result<VocabSpec> read_vocab_spec(const GgufFile& gguf);

struct Vocab {
  VocabKind kind = VocabKind::kSpm;
  std::string model;  // "llama" | "gpt2"
  std::string pre;
  std::vector<std::string> text;  // [n_vocab] vocabulary entries
  std::vector<float> score;       // [n_vocab]
  std::vector<uint32_t> attr;     // [n_vocab] TokenAttr bits
  std::unordered_map<std::string, TokenId> ids;  // text -> id
  TokenId bos = -1, eos = -1, eot = -1, eom = -1, unk = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // SPM: " " before the first text fragment and after specials
  bool clean_spaces = false;      // detokenize removes " ," " ." " 's"... (llama.cpp clean_spaces)
  std::vector<TokenId> special_tokens;  // control/user-defined/unknown ids, longest text first
  std::unordered_set<TokenId> eog;      // end-of-generation ids

  int32_t n_vocab() const { return static_cast<int32_t>(text.size()); }
  TokenId find(std::string_view s) const {
    const auto it = ids.find(std::string(s));
    return it == ids.end() ? -1 : it->second;
  }
};

// Applies llama.cpp's load rules: per-model defaults, special ids, add_bos/add_eos, EOT/EOM
// detection by text, the EOG list, unused-token marking, the phi-3 strip rule.
// The BPE pre-tokenizer rules (add_bos for llama3, clean_spaces) are applied by the caller.
Result<Vocab> build_vocab(const VocabSpec& spec);

// A piece of input after the special-token split: a special token, or raw text.
struct TextFragment {
  TokenId token = -1;     // >= 0: a special token
  std::string_view text;  // token < 0: raw text (a view into the input)
};

// llama.cpp's tokenizer_st_partition: special tokens, longest first, are cut out of the
// raw text wherever they occur. Control and unknown tokens only when parse_special;
// user-defined tokens always (as llama.cpp and HF tokenizers do).
// plain: byte ranges of text where no special token is recognised (Tokenizer::encode).
std::vector<TextFragment> partition_special(const Vocab& vocab, std::string_view text, bool parse_special,
                                            std::span<const std::pair<size_t, size_t>> plain = {});

// Builds a tokenizer from metadata (from_gguf = read_vocab_spec + this).
Result<std::unique_ptr<Tokenizer>> make_tokenizer(const VocabSpec& spec);

}  // namespace vlkv
