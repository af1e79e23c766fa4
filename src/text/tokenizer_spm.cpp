#include "text/tokenizer_spm.h"

#include <queue>
#include <string>
#include <unordered_map>
#include <utility>

#include "text/symbol_merge.h"
#include "text/unicode.h"

namespace vlkv {
namespace {

// One symbol of the linked list that merging shrinks: a byte range of the text.
struct Symbol {
  int prev = -1;
  int next = -1;
  const char* text = nullptr;
  size_t n = 0;  // 0 once merged into its left neighbour
};

struct Bigram {
  int left = 0;
  int right = 0;
  float score = 0.0f;
  size_t size = 0;  // byte length when it was queued; stale entries no longer match
};

// Highest score first; on ties the leftmost pair (llama.cpp's llm_bigram_spm::comparator).
struct BigramLess {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

class SpmSession {
 public:
  explicit SpmSession(const Vocab& vocab) : vocab_(vocab) {}

  void tokenize(std::string_view text, std::vector<TokenId>* out) {
    // One symbol per UTF-8 character (length from the lead byte, clipped at the end).
    size_t offset = 0;
    while (offset < text.size()) {
      Symbol sym;
      sym.text = text.data() + offset;
      sym.n = std::min(unicode::utf8_len(text[offset]), text.size() - offset);
      offset += sym.n;
      sym.prev = static_cast<int>(symbols_.size()) - 1;
      sym.next = offset == text.size() ? -1 : static_cast<int>(symbols_.size()) + 1;
      symbols_.push_back(sym);
    }
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) try_add_bigram(i - 1, i);

    while (!queue_.empty()) {
      const Bigram bigram = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[bigram.left];
      Symbol& right = symbols_[bigram.right];
      if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;  // stale
      merge_symbol_pair(symbols_, bigram.left, bigram.right, [this](int l, int r) { try_add_bigram(l, r); });
    }
    for (int i = symbols_.empty() ? -1 : 0; i != -1; i = symbols_[i].next) resegment(symbols_[i], out);
  }

 private:
  void try_add_bigram(int left, int right) {
    if (left == -1 || right == -1) return;
    std::string text(symbols_[left].text, symbols_[left].n + symbols_[right].n);
    const TokenId id = vocab_.find(text);
    if (id < 0) return;
    queue_.push({left, right, vocab_.score[id], text.size()});
    rev_merge_[std::move(text)] = {left, right};
  }

  // A merged symbol that is no vocabulary piece is split back along the merges that built it.
  void resegment(const Symbol& symbol, std::vector<TokenId>* out) {
    const std::string text(symbol.text, symbol.n);
    if (const TokenId id = vocab_.find(text); id >= 0) {
      out->push_back(id);
      return;
    }
    const auto it = rev_merge_.find(text);
    if (it == rev_merge_.end()) {
      for (char c : text) {
        if (const TokenId id = byte_token(static_cast<uint8_t>(c)); id >= 0) out->push_back(id);
      }
      return;
    }
    resegment(symbols_[it->second.first], out);
    resegment(symbols_[it->second.second], out);
  }

  // <0xNN>, else the byte itself as a piece (llama.cpp's byte_to_token), else unk.
  TokenId byte_token(uint8_t byte) const {
    static constexpr char kHex[] = "0123456789ABCDEF";
    const char buf[6] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
    if (const TokenId id = vocab_.find(std::string_view(buf, 6)); id >= 0) return id;
    const char raw = static_cast<char>(byte);
    if (const TokenId id = vocab_.find(std::string_view(&raw, 1)); id >= 0) return id;
    return vocab_.unk;
  }

  const Vocab& vocab_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue_;
  std::unordered_map<std::string, std::pair<int, int>> rev_merge_;
};

}  // namespace

void spm_tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>* out) {
  SpmSession(vocab).tokenize(text, out);
}

std::string spm_escape_whitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for (char c : text) {
    if (c == ' ') {
      out += "\xE2\x96\x81";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace vlkv
