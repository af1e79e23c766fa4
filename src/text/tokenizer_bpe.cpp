#include "text/tokenizer_bpe.h"

#include <algorithm>
#include <queue>

#include "base/log.h"
#include "text/symbol_merge.h"
#include "text/unicode.h"

namespace vlkv {
namespace {

// llama.cpp's pre-tokenizer regexes. GPT-2's gets the trailing "|\s+" of the original
// (llama.cpp's hand-written GPT-2 splitter implements it; the regex list omits it).
constexpr const char* kGpt2Regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
constexpr const char* kLlama3Regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

bool in(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The symbols of one word while merging (byte ranges of the word).
struct Symbol {
  int prev = -1;
  int next = -1;
  size_t begin = 0;
  size_t n = 0;  // 0 once merged into its left neighbour
};

struct Bigram {
  int left = 0;
  int right = 0;
  int rank = 0;
  std::string text;  // left + right when queued; stale entries no longer match
};

// Lowest rank first; on ties the leftmost pair (llama.cpp's llm_bigram_bpe::comparator).
struct BigramGreater {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
  }
};

std::string rank_key(std::string_view left, std::string_view right) {
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left);
  key.push_back('\0');
  key.append(right);
  return key;
}

}  // namespace

Result<PreTokenizerConfig> pre_tokenizer_config(std::string_view pre) {
  PreTokenizerConfig c;
  if (pre.empty() || pre == "default") {
    if (pre.empty()) VLKV_LOG_WARN("tokenizer: no tokenizer.ggml.pre, using 'default' (quality may suffer)");
    c.patterns = {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2Regex, "\\p{N}+", "[0-9][0-9][0-9]"};
  } else if (in(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                      "jina-v5-nano"})) {
    c.patterns = {kLlama3Regex};
    c.ignore_merges = true;
    c.force_add_bos = true;
  } else if (in(pre, {"dbrx", "smaug-bpe"})) {
    c.patterns = {kLlama3Regex};
  } else if (in(pre, {"gpt-2", "phi-2", "mpt", "olmo", "jais", "gigachat", "exaone4", "mellum", "a.x-4.0",
                      "jina-es", "jina-de", "jina-v2-es", "jina-v2-de"})) {
    c.patterns = {kGpt2Regex};
  } else if (in(pre, {"trillion", "granite-docling"})) {
    c.patterns = {kGpt2Regex};
    c.clean_spaces = false;
  } else if (in(pre, {"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"})) {
    c.patterns = {"\\p{N}", kGpt2Regex};
  } else if (in(pre, {"smollm", "command-r"})) {
    c.patterns = {"\\p{N}", kGpt2Regex};
    c.clean_spaces = false;
  } else if (in(pre, {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open"})) {
    c.patterns = {kQwen2Regex};
    c.clean_spaces = false;
  } else if (in(pre, {"megrez", "stablelm2"})) {
    c.patterns = {kQwen2Regex};
  } else {
    return unsupported("BPE pre-tokenizer '" + std::string(pre) + "'");
  }
  return c;
}

Result<std::unique_ptr<BpeModel>> BpeModel::create(const Vocab& vocab, const std::vector<std::string>& merges,
                                                   const PreTokenizerConfig& config) {
  (void)vocab;
  std::unique_ptr<BpeModel> model(new BpeModel());
  VLKV_ASSIGN_OR_RETURN(model->splitter_, RegexSplitter::create(config.patterns));
  model->ignore_merges_ = config.ignore_merges;
  model->ranks_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (space == std::string::npos) continue;  // malformed entry: never matches (llama.cpp stores an empty pair)
    model->ranks_.emplace(rank_key(std::string_view(m).substr(0, space), std::string_view(m).substr(space + 1)),
                          static_cast<int>(i));
  }
  return model;
}

int BpeModel::rank(std::string_view left, std::string_view right) const {
  const auto it = ranks_.find(rank_key(left, right));
  return it == ranks_.end() ? -1 : it->second;
}

std::vector<std::string> BpeModel::pre_tokenize(std::string_view text) const {
  std::vector<std::string> words = splitter_->split(unicode::sanitize_utf8(text));
  for (std::string& word : words) {
    std::string encoded;
    encoded.reserve(word.size() * 2);
    for (char c : word) encoded += unicode::byte_to_unicode(static_cast<uint8_t>(c));
    word = std::move(encoded);
  }
  return words;
}

void BpeModel::tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>* out) const {
  std::vector<Symbol> symbols;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramGreater> queue;
  for (const std::string& word : pre_tokenize(text)) {
    symbols.clear();
    queue = {};
    const auto piece = [&](const Symbol& s) { return std::string_view(word).substr(s.begin, s.n); };
    const auto add_bigram = [&](int left, int right) {
      if (left == -1 || right == -1) return;
      const std::string_view l = piece(symbols[left]), r = piece(symbols[right]);
      const int rk = rank(l, r);
      if (rk < 0) return;
      std::string joined(l);
      joined.append(r);
      queue.push({left, right, rk, std::move(joined)});
    };

    if (ignore_merges_ && vocab.find(word) >= 0) {
      symbols.push_back({-1, -1, 0, word.size()});
    } else {
      for (size_t offset = 0; offset < word.size();) {
        const size_t len = std::min(unicode::utf8_len(word[offset]), word.size() - offset);
        const int index = static_cast<int>(symbols.size());
        symbols.push_back({index - 1, offset + len == word.size() ? -1 : index + 1, offset, len});
        offset += len;
      }
    }
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) add_bigram(i - 1, i);

    while (!queue.empty()) {
      const Bigram bigram = queue.top();
      queue.pop();
      Symbol& left = symbols[bigram.left];
      Symbol& right = symbols[bigram.right];
      if (left.n == 0 || right.n == 0) continue;
      if (left.n + right.n != bigram.text.size() ||
          std::string_view(word).substr(left.begin, left.n + right.n) != bigram.text ||
          left.begin + left.n != right.begin) {
        continue;  // outdated
      }
      merge_symbol_pair(symbols, bigram.left, bigram.right, add_bigram);
    }

    for (const Symbol& s : symbols) {
      if (s.n == 0) continue;
      const std::string_view str = piece(s);
      if (const TokenId id = vocab.find(str); id >= 0) {
        out->push_back(id);
        continue;
      }
      // No such piece: llama.cpp looks each raw byte of the encoded text up on its own.
      for (char c : str) {
        if (const TokenId id = vocab.find(std::string_view(&c, 1)); id >= 0) out->push_back(id);
      }
    }
  }
}

}  // namespace vlkv
