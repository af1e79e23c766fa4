// Pre-tokenizer word splitting with PCRE2 regexes (Unicode properties), with the
// semantics of llama.cpp's unicode_regex_split: the patterns apply in order, each one
// splitting every piece the previous one left, and text between matches stays a piece.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vlkv/status.h"

namespace vlkv {

class RegexSplitter {
 public:
  // Patterns are PCRE2 syntax matched with UTF and UCP. "\s" / "\S" are rewritten to the
  // Unicode White_Space set llama.cpp uses (PCRE2's own \s misses U+0085). A pattern never
  // looks past the piece it splits (lookaheads see the piece's end as the text's end).
  static Result<std::unique_ptr<RegexSplitter>> create(const std::vector<std::string>& patterns);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // `text` must be valid UTF-8 (see unicode::sanitize_utf8). Returns the pieces in order;
  // they concatenate back to `text`. Thread-safe: compiled patterns are read-only.
  std::vector<std::string> split(std::string_view text) const;

 private:
  struct Impl;
  explicit RegexSplitter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The pattern with \s and \S replaced as described above (exposed for tests).
std::string expand_whitespace_classes(std::string_view pattern);

}  // namespace vlkv
