#include "text/tokenizer_vocab.h"

#include <algorithm>
#include <cctype>

#include "base/log.h"

namespace vlkv {
namespace {

// Reads an optional key: absent -> nullopt, present but mistyped -> the getter's Status.
template <typename T, typename Getter>
Status read_optional(const GgufFile& gguf, std::string_view key, Getter getter, std::optional<T>* out) {
  if (gguf.find(key) == nullptr) return Status::ok();
  auto value = (gguf.*getter)(key);
  if (!value.is_ok()) return value.status();
  *out = static_cast<T>(value.value());
  return Status::ok();
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Token texts llama.cpp treats as end-of-turn (EOT) when tokenizer.ggml.eot_token_id is absent.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<end_of_utterance>",
};
// Token texts that end generation (llama.cpp's special_eog_ids text list).
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[",
};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};

template <size_t N>
bool one_of(std::string_view s, const std::string_view (&list)[N]) {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

uint32_t attr_from_type(int32_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::kUnknown: return kAttrUnknown;
    case TokenType::kUnused: return kAttrUnused;
    case TokenType::kNormal: return kAttrNormal;
    case TokenType::kControl: return kAttrControl;
    case TokenType::kUserDefined: return kAttrUserDefined;
    case TokenType::kByte: return kAttrByte;
    default: return kAttrUndefined;
  }
}

}  // namespace

Result<VocabSpec> read_vocab_spec(const GgufFile& gguf) {
  VocabSpec spec;
  if (gguf.find("tokenizer.ggml.model") == nullptr) return not_found("no tokenizer.ggml.model in " + gguf.path());
  VLKV_ASSIGN_OR_RETURN(spec.model, gguf.get_string("tokenizer.ggml.model"));
  if (spec.model == "none" || spec.model == "no_vocab") return not_found("model has no vocabulary (" + spec.model + ")");
  if (gguf.find("tokenizer.ggml.tokens") == nullptr) return not_found("no tokenizer.ggml.tokens in " + gguf.path());
  VLKV_ASSIGN_OR_RETURN(spec.tokens, gguf.get_string_array("tokenizer.ggml.tokens"));

  std::optional<std::string> pre, name;
  VLKV_RETURN_IF_ERROR(read_optional(gguf, "tokenizer.ggml.pre", &GgufFile::get_string, &pre));
  VLKV_RETURN_IF_ERROR(read_optional(gguf, "general.name", &GgufFile::get_string, &name));
  spec.pre = pre.value_or("");
  spec.general_name = name.value_or("");

  if (gguf.find("tokenizer.ggml.scores") != nullptr) {
    VLKV_ASSIGN_OR_RETURN(std::vector<double> scores, gguf.get_f64_array("tokenizer.ggml.scores"));
    spec.scores.assign(scores.begin(), scores.end());
  }
  if (gguf.find("tokenizer.ggml.token_type") != nullptr) {
    VLKV_ASSIGN_OR_RETURN(std::vector<int64_t> types, gguf.get_i64_array("tokenizer.ggml.token_type"));
    spec.token_types.assign(types.begin(), types.end());
  }
  if (gguf.find("tokenizer.ggml.merges") != nullptr) {
    VLKV_ASSIGN_OR_RETURN(spec.merges, gguf.get_string_array("tokenizer.ggml.merges"));
  }

  const std::pair<const char*, std::optional<int64_t>*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &spec.bos_id},         {"tokenizer.ggml.eos_token_id", &spec.eos_id},
      {"tokenizer.ggml.eot_token_id", &spec.eot_id},         {"tokenizer.ggml.eom_token_id", &spec.eom_id},
      {"tokenizer.ggml.unknown_token_id", &spec.unk_id},     {"tokenizer.ggml.fim_pad_token_id", &spec.fim_pad_id},
      {"tokenizer.ggml.fim_rep_token_id", &spec.fim_rep_id}, {"tokenizer.ggml.fim_sep_token_id", &spec.fim_sep_id},
  };
  for (const auto& [key, out] : ids) {
    VLKV_RETURN_IF_ERROR(read_optional(gguf, key, &GgufFile::get_i64, out));
  }
  VLKV_RETURN_IF_ERROR(read_optional(gguf, "tokenizer.ggml.add_bos_token", &GgufFile::get_bool, &spec.add_bos));
  VLKV_RETURN_IF_ERROR(read_optional(gguf, "tokenizer.ggml.add_eos_token", &GgufFile::get_bool, &spec.add_eos));
  VLKV_RETURN_IF_ERROR(
      read_optional(gguf, "tokenizer.ggml.add_space_prefix", &GgufFile::get_bool, &spec.add_space_prefix));
  return spec;
}

Result<Vocab> build_vocab(const VocabSpec& spec) {
  Vocab v;
  v.model = spec.model;
  v.pre = spec.pre;
  if (spec.model == "llama") {
    v.kind = VocabKind::kSpm;
    v.bos = 1;
    v.eos = 2;
    v.unk = 0;
    v.add_space_prefix = true;
    v.add_bos = true;
  } else if (spec.model == "gpt2") {
    v.kind = VocabKind::kBpe;
    v.bos = 11;
    v.eos = 11;
    v.clean_spaces = true;  // the pre-tokenizer rules may turn it off
  } else {
    return unsupported("tokenizer model '" + spec.model + "' (supported: llama, gpt2)");
  }
  if (spec.add_space_prefix) v.add_space_prefix = *spec.add_space_prefix;

  const size_t n = spec.tokens.size();
  if (n == 0) return invalid_file("empty tokenizer.ggml.tokens");
  if (n > static_cast<size_t>(INT32_MAX)) return invalid_file("vocabulary too large");
  if (!spec.scores.empty() && spec.scores.size() < n) return invalid_file("tokenizer.ggml.scores shorter than the vocabulary");
  if (!spec.token_types.empty() && spec.token_types.size() < n) {
    return invalid_file("tokenizer.ggml.token_type shorter than the vocabulary");
  }
  v.text.resize(n);
  v.score.assign(n, 0.0f);
  v.attr.assign(n, kAttrNormal);
  v.ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    v.text[i] = spec.tokens[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : spec.tokens[i];
    if (!v.ids.emplace(v.text[i], static_cast<TokenId>(i)).second) {
      return invalid_file("duplicate token in vocabulary: '" + v.text[i] + "'");
    }
    if (!spec.scores.empty()) v.score[i] = spec.scores[i];
    if (!spec.token_types.empty()) v.attr[i] = attr_from_type(spec.token_types[i]);
  }

  // Special ids: an out-of-range default is dropped; an out-of-range key keeps the default.
  const auto in_range = [&](int64_t id) { return id >= 0 && id < static_cast<int64_t>(n); };
  TokenId fim_pad = -1, fim_rep = -1, fim_sep = -1;
  const std::pair<TokenId*, const std::optional<int64_t>*> specials[] = {
      {&v.bos, &spec.bos_id}, {&v.eos, &spec.eos_id}, {&v.eot, &spec.eot_id},     {&v.eom, &spec.eom_id},
      {&v.unk, &spec.unk_id}, {&fim_pad, &spec.fim_pad_id}, {&fim_rep, &spec.fim_rep_id}, {&fim_sep, &spec.fim_sep_id},
  };
  for (const auto& [id, key] : specials) {
    if (*id >= 0 && !in_range(*id)) *id = -1;
    if (!key->has_value()) continue;
    if (in_range(**key)) {
      *id = static_cast<TokenId>(**key);
    } else {
      VLKV_LOG_WARN("tokenizer: special token id %lld out of range, keeping %d", static_cast<long long>(**key), *id);
    }
  }
  if (spec.add_bos) v.add_bos = *spec.add_bos;
  if (spec.add_eos) v.add_eos = *spec.add_eos;

  // Control-looking tokens found by text (ascending id; llama.cpp walks a hash map).
  const auto make_control = [&](TokenId id) { v.attr[id] |= kAttrControl; };
  for (TokenId id = 0; id < static_cast<TokenId>(n); ++id) {
    const std::string& t = v.text[id];
    if (v.eot < 0 && one_of(t, kEotTexts)) { v.eot = id; make_control(id); }
    if (v.eom < 0 && t == "<|eom_id|>") { v.eom = id; make_control(id); }
    if (fim_pad < 0 && one_of(t, kFimPadTexts)) { fim_pad = id; make_control(id); }
    if (fim_rep < 0 && one_of(t, kFimRepTexts)) { fim_rep = id; make_control(id); }
    if (fim_sep < 0 && t == kFimSepTexts[0]) { fim_sep = id; make_control(id); }
  }
  for (TokenId id = 0; id < static_cast<TokenId>(n); ++id) {
    if ((v.attr[id] & kAttrControl) && contains(v.text[id], "unused")) v.attr[id] |= kAttrUnused;
  }

  // End-of-generation set.
  for (TokenId id : {fim_pad, fim_rep, fim_sep}) {
    if (id >= 0) v.eog.insert(id);
  }
  for (TokenId id = 0; id < static_cast<TokenId>(n); ++id) {
    if (one_of(v.text[id], kEogTexts)) {
      v.eog.insert(id);
      make_control(id);
    }
  }
  for (TokenId id : {v.eos, v.eot, v.eom}) {
    if (id >= 0) v.eog.insert(id);
  }
  // o200k_harmony / solar-open: "<|end|>" is not an end of generation there.
  {
    const TokenId ret = v.find("<|return|>"), call = v.find("<|call|>"), calls = v.find("<|calls|>");
    const TokenId flush = v.find("<|flush|>"), end = v.find("<|end|>");
    if (end >= 0 && ((ret >= 0 && call >= 0) || (calls >= 0 && flush >= 0))) {
      v.eog.erase(end);
      v.attr[end] = kAttrUserDefined;
    }
  }
  // gemma4 / paddleocr: "</s>" is not an end of generation when "<|tool_response>" exists.
  {
    const TokenId s = v.find("</s>");
    if (s >= 0 && v.find("<|tool_response>") >= 0 && v.eog.count(s)) {
      v.eog.erase(s);
      v.attr[s] = kAttrNormal;
    }
  }

  for (TokenId id = 0; id < static_cast<TokenId>(n); ++id) {
    if (v.attr[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) v.special_tokens.push_back(id);
  }
  std::stable_sort(v.special_tokens.begin(), v.special_tokens.end(),
                   [&](TokenId a, TokenId b) { return v.text[a].size() > v.text[b].size(); });

  // llama.cpp's per-model attribute rule: phi-3 specials swallow the whitespace after them.
  std::string name = spec.general_name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (contains(name, "phi-3") || contains(name, "phi3")) {
    for (TokenId id : v.special_tokens) v.attr[id] |= kAttrRstrip;
    if (TokenId id = v.find("</s>"); id >= 0) v.attr[id] |= kAttrRstrip;
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (TokenId id = v.find(t); id >= 0) v.attr[id] &= ~static_cast<uint32_t>(kAttrRstrip);
    }
  }
  return v;
}

std::vector<TextFragment> partition_special(const Vocab& vocab, std::string_view text, bool parse_special,
                                            std::span<const std::pair<size_t, size_t>> plain) {
  std::vector<TextFragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, text});
  const auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  for (TokenId special : vocab.special_tokens) {
    const uint32_t attr = vocab.attr[special];
    if (!parse_special && (attr & (kAttrControl | kAttrUnknown))) continue;
    const std::string& needle = vocab.text[special];
    std::vector<TextFragment> next;
    next.reserve(fragments.size() + 2);
    for (const TextFragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      size_t match, from = 0;
      while ((match = rest.find(needle, from)) != std::string_view::npos) {
        const size_t at = static_cast<size_t>(rest.data() - text.data()) + match;
        if (std::any_of(plain.begin(), plain.end(),
                        [&](const auto& r) { return at < r.second && at + needle.size() > r.first; })) {
          from = match + 1;  // typed by a client: plain text
          continue;
        }
        from = 0;
        std::string_view left = rest.substr(0, match);
        if (attr & kAttrLstrip) {
          while (!left.empty() && is_space(left.back())) left.remove_suffix(1);
        }
        if (!left.empty()) next.push_back({-1, left});
        next.push_back({special, {}});
        rest.remove_prefix(match + needle.size());
        if (attr & kAttrRstrip) {
          while (!rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
        }
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    fragments = std::move(next);
  }
  return fragments;
}

}  // namespace vlkv
