#include "text/tokenizer.h"

#include <utility>

#include "base/log.h"
#include "text/tokenizer_bpe.h"
#include "text/tokenizer_spm.h"
#include "text/tokenizer_vocab.h"
#include "text/unicode.h"

namespace vlkv {
namespace {

// llama.cpp's llama_decode_text: byte-level alphabet back to bytes.
std::string decode_byte_level(std::string_view text) {
  std::string out;
  size_t offset = 0;
  while (offset < text.size()) {
    const size_t start = offset;
    const uint32_t cpt = unicode::decode_one(text, &offset);
    std::string utf8;
    unicode::append_utf8(cpt, &utf8);
    const int byte = unicode::unicode_to_byte(utf8);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {  // not in the alphabet: llama.cpp's marker
      static constexpr char kHex[] = "0123456789abcdef";
      out += "[UNK_BYTE_0x";
      for (char c : utf8) {
        out += kHex[static_cast<uint8_t>(c) >> 4];
        out += kHex[static_cast<uint8_t>(c) & 15];
      }
      out.append(text.substr(start, offset - start));
      out += "]";
    }
  }
  return out;
}

// llama.cpp's detokenizer clean-up for BPE vocabularies (clean_spaces).
std::string clean_spaces(const std::string& in) {
  std::string a;  // pass 1: " ?", " !", " .", " ," lose the space
  for (size_t i = 0; i < in.size(); ++i) {
    const char x = in[i];
    if (i > 0 && in[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) a.pop_back();
    a.push_back(x);
  }
  std::string b;  // pass 2: " ' " -> "'"
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = a[i];
    if (i > 0 && x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
      b.pop_back();
      b.push_back(x);
      ++i;  // drop the next space
      continue;
    }
    b.push_back(x);
  }
  std::string c;  // pass 3: " 's", " 'm", " 're", " 've" lose the space
  for (size_t i = 0; i < b.size(); ++i) {
    const char x = b[i];
    if (i > 0 && b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
      const char x1 = b[i + 1];
      const bool drop = x1 == 's' || x1 == 'm' ||
                        (i + 2 < b.size() && ((x1 == 'r' && b[i + 2] == 'e') || (x1 == 'v' && b[i + 2] == 'e')));
      if (drop) c.pop_back();
    }
    c.push_back(x);
  }
  return c;
}

class VocabTokenizer final : public Tokenizer {
 public:
  VocabTokenizer(Vocab vocab, std::unique_ptr<BpeModel> bpe) : vocab_(std::move(vocab)), bpe_(std::move(bpe)) {
    pieces_.reserve(vocab_.text.size());
    for (TokenId id = 0; id < vocab_.n_vocab(); ++id) pieces_.push_back(make_piece(id));
  }

  std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special,
                              std::span<const std::pair<size_t, size_t>> plain) const override {
    std::vector<TokenId> out;
    const bool add_bos = add_special && vocab_.add_bos && vocab_.bos >= 0;
    const bool add_eos = add_special && vocab_.add_eos && vocab_.eos >= 0;
    if (add_bos) out.push_back(vocab_.bos);
    bool prev_special = true;  // SPM: the first text fragment gets the space prefix
    for (const TextFragment& f : partition_special(vocab_, text, parse_special, plain)) {
      if (f.token >= 0) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      if (vocab_.kind == VocabKind::kSpm) {
        std::string raw;
        if (vocab_.add_space_prefix && prev_special) raw = " ";
        raw.append(f.text);
        spm_tokenize(vocab_, spm_escape_whitespace(raw), &out);
      } else {
        bpe_->tokenize(vocab_, f.text, &out);
      }
      prev_special = false;
    }
    if (add_bos && out.size() >= 2 && out[1] == vocab_.bos) {
      VLKV_LOG_WARN("tokenizer: the prompt starts with BOS and another BOS was added");
    }
    if (add_eos) out.push_back(vocab_.eos);
    return out;
  }

  std::string token_to_piece(TokenId id) const override {
    if (id < 0 || id >= vocab_.n_vocab()) return {};
    return pieces_[id];
  }

  // llama_detokenize(remove_special=false, unparse_special=false).
  std::string detokenize(const std::vector<TokenId>& ids) const {
    std::string text;
    bool remove_space = vocab_.add_space_prefix;  // the first piece loses one leading space
    for (TokenId id : ids) {
      std::string_view piece = pieces_.empty() || id < 0 || id >= vocab_.n_vocab() ? std::string_view() : pieces_[id];
      if (remove_space && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
      remove_space = false;
      text.append(piece);
    }
    return vocab_.clean_spaces ? clean_spaces(text) : text;
  }

  int32_t n_vocab() const override { return vocab_.n_vocab(); }
  TokenId bos() const override { return vocab_.bos; }
  TokenId eos() const override { return vocab_.eos; }
  bool is_end_of_generation(TokenId id) const override { return id >= 0 && vocab_.eog.count(id) > 0; }
  std::string model_name() const override { return vocab_.model; }
  std::string_view token_text(TokenId id) const override {
    return id >= 0 && id < vocab_.n_vocab() ? std::string_view(vocab_.text[id]) : std::string_view();
  }
  TokenType token_type(TokenId id) const override {
    if (id < 0 || id >= vocab_.n_vocab()) return TokenType::kUndefined;
    const uint32_t a = vocab_.attr[id];
    if (a & kAttrUnknown) return TokenType::kUnknown;
    if (a & kAttrControl) return TokenType::kControl;
    if (a & kAttrUserDefined) return TokenType::kUserDefined;
    if (a & kAttrByte) return TokenType::kByte;
    if (a & kAttrUnused) return TokenType::kUnused;
    if (a & kAttrNormal) return TokenType::kNormal;
    return TokenType::kUndefined;
  }
  TokenId find_token(std::string_view text) const override { return vocab_.find(text); }

 private:
  // llama_token_to_piece(special=false): control/unknown (and undefined/unused) tokens
  // render as nothing, user-defined as their text, bytes as the byte.
  std::string make_piece(TokenId id) const {
    const uint32_t a = vocab_.attr[id];
    const std::string& text = vocab_.text[id];
    if (a & (kAttrUnknown | kAttrControl)) return {};
    if (a & kAttrUserDefined) return text;
    if (a & kAttrNormal) {
      if (vocab_.kind == VocabKind::kBpe) return decode_byte_level(text);
      std::string out;
      for (size_t i = 0; i < text.size(); ++i) {
        if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
          out.push_back(' ');
          i += 2;
        } else {
          out.push_back(text[i]);
        }
      }
      return out;
    }
    if (a & kAttrByte) {
      if (text.size() == 6 && text.compare(0, 3, "<0x") == 0) {
        return std::string(1, static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16)));
      }
      return {};
    }
    return {};
  }

  Vocab vocab_;
  std::unique_ptr<BpeModel> bpe_;   // BPE vocabularies only
  std::vector<std::string> pieces_;  // [n_vocab] token_to_piece cache
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_tokenizer(const VocabSpec& spec) {
  VLKV_ASSIGN_OR_RETURN(Vocab vocab, build_vocab(spec));
  std::unique_ptr<BpeModel> bpe;
  if (vocab.kind == VocabKind::kBpe) {
    VLKV_ASSIGN_OR_RETURN(PreTokenizerConfig config, pre_tokenizer_config(spec.pre));
    vocab.clean_spaces = config.clean_spaces;
    if (config.force_add_bos && !spec.add_bos) vocab.add_bos = true;
    if (spec.merges.empty()) return invalid_file("BPE vocabulary without tokenizer.ggml.merges");
    VLKV_ASSIGN_OR_RETURN(bpe, BpeModel::create(vocab, spec.merges, config));
  }
  if (vocab.add_bos && vocab.bos < 0) return invalid_file("add_bos_token is true but there is no BOS token");
  if (vocab.add_eos && vocab.eos < 0) return invalid_file("add_eos_token is true but there is no EOS token");
  return std::unique_ptr<Tokenizer>(new VocabTokenizer(std::move(vocab), std::move(bpe)));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& gguf) {
  VLKV_ASSIGN_OR_RETURN(VocabSpec spec, read_vocab_spec(gguf));
  auto tokenizer = make_tokenizer(spec);
  if (!tokenizer.is_ok()) return tokenizer.status().with_context("tokenizer of " + gguf.path());
  return tokenizer;
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids) const {
  if (const auto* self = dynamic_cast<const VocabTokenizer*>(this)) return self->detokenize(ids);
  std::string text;  // another implementation (a test double): plain concatenation
  for (TokenId id : ids) text += token_to_piece(id);
  return text;
}

TokenId Tokenizer::find_token_by_piece(std::string_view piece) const {
  for (TokenId id = 0; id < n_vocab(); ++id) {
    const TokenType t = token_type(id);
    const bool rendered_as_text = t == TokenType::kControl || t == TokenType::kUnknown;
    if (rendered_as_text ? token_text(id) == piece : token_to_piece(id) == piece) return id;
  }
  return -1;
}

}  // namespace vlkv
