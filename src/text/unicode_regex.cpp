#include "text/unicode_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

namespace vlkv {
namespace {

// Unicode White_Space, as a character-class body (llama.cpp's unicode_set_whitespace).
constexpr std::string_view kWhitespaceClass =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

struct CodeDeleter {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};

}  // namespace

struct RegexSplitter::Impl {
  std::vector<std::unique_ptr<pcre2_code, CodeDeleter>> codes;
};

RegexSplitter::RegexSplitter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RegexSplitter::~RegexSplitter() = default;

std::string expand_whitespace_classes(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char n = pattern[++i];
      if (n == 's') {
        if (in_class) {
          out += kWhitespaceClass;
        } else {
          out += '[';
          out += kWhitespaceClass;
          out += ']';
        }
      } else if (n == 'S' && !in_class) {
        out += "[^";
        out += kWhitespaceClass;
        out += ']';
      } else {
        out += c;
        out += n;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

Result<std::unique_ptr<RegexSplitter>> RegexSplitter::create(const std::vector<std::string>& patterns) {
  auto impl = std::make_unique<Impl>();
  for (const std::string& pattern : patterns) {
    const std::string expanded = expand_whitespace_classes(pattern);
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(expanded.data()), expanded.size(),
                                     PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      return invalid_argument("pre-tokenizer regex '" + pattern + "' at " + std::to_string(error_offset) +
                              ": " + reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional speed-up; the interpreter is the fallback
    impl->codes.emplace_back(code);
  }
  return std::unique_ptr<RegexSplitter>(new RegexSplitter(std::move(impl)));
}

std::vector<std::string> RegexSplitter::split(std::string_view text) const {
  // Pieces as [begin, end) byte ranges of `text`; each pattern refines all of them.
  std::vector<std::pair<size_t, size_t>> pieces;
  if (!text.empty()) pieces.emplace_back(0, text.size());
  for (const auto& code : impl_->codes) {
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(pcre2_match_data_create_from_pattern(code.get(), nullptr));
    std::vector<std::pair<size_t, size_t>> next;
    next.reserve(pieces.size() * 2);
    for (const auto& [begin, end] : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + begin);
      const size_t length = end - begin;
      size_t prev = 0;    // end of the last emitted piece, relative to begin
      size_t start = 0;   // where the next search starts
      while (start < length) {
        const int rc = pcre2_match(code.get(), subject, length, start, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
        if (rc < 0) break;  // PCRE2_ERROR_NOMATCH (or a resource limit: keep the rest whole)
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        const size_t m0 = ov[0], m1 = ov[1];
        if (m1 == m0) {  // empty match: step over one code point, emit nothing
          start = m0 + 1;
          while (start < length && (static_cast<uint8_t>(text[begin + start]) & 0xC0) == 0x80) ++start;
          continue;
        }
        if (m0 > prev) next.emplace_back(begin + prev, begin + m0);
        next.emplace_back(begin + m0, begin + m1);
        prev = start = m1;
      }
      if (prev < length) next.emplace_back(begin + prev, end);
    }
    pieces = std::move(next);
  }
  std::vector<std::string> words;
  words.reserve(pieces.size());
  for (const auto& [begin, end] : pieces) words.emplace_back(text.substr(begin, end - begin));
  return words;
}

}  // namespace vlkv
