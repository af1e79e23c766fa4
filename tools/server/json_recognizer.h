// An incremental byte-level recognizer for JSON documents of a JsonGrammar (json_schema.h):
// a pushdown automaton that says, byte by byte, whether the bytes so far are still a
// prefix of some document the grammar accepts. Constrained decoding (token_mask.h) tries
// each vocabulary token's bytes on a copy of it. Copies cost the frames in use only.
//
// What it accepts is a subset of the documents that match the schema: between tokens nothing,
// one space, or a newline and up to kMaxIndent spaces/tabs (llama.cpp's json.gbnf `ws`), none
// after the document; numbers of at most
// kMaxDigits digits per part and 2 exponent digits; strings without \u escapes of
// surrogates (write such characters as UTF-8); declared object properties in their order;
// enum/const values written as compact JSON (nlohmann's dump); nesting of kMaxDepth - 1.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "server/json_schema.h"

namespace vlkv::server {

class JsonRecognizer {
 public:
  static constexpr int kMaxDepth = 32;
  static constexpr int kMaxIndent = 20;
  static constexpr int kMaxDigits = 16;

  // grammar must outlive the recognizer.
  explicit JsonRecognizer(const JsonGrammar& grammar);
  JsonRecognizer(const JsonRecognizer& other) { *this = other; }
  JsonRecognizer& operator=(const JsonRecognizer& other);

  // False when byte cannot follow the bytes so far; the state is then unusable (feed a copy).
  bool feed(uint8_t byte);
  bool feed(std::string_view bytes);
  // The bytes so far are a whole document (it may still go on, e.g. a top-level number).
  bool complete() const;
  // A whole document that no byte can extend: generation is over.
  bool finished() const { return depth_ == 1 && frames_[0].phase != 0; }

 private:
  enum class FrameKind : uint8_t { kRoot, kObject, kArray, kString, kKey, kNumber, kLiterals };
  struct Frame {
    FrameKind kind = FrameKind::kRoot;
    uint8_t phase = 0;
    uint8_t utf8_left = 0;             // string: continuation bytes still expected
    uint8_t utf8_lo = 0, utf8_hi = 0;  // string: the range of the next continuation byte
    uint8_t escape = 0;                // string: 0 none, 1 after '\', 2-5 at \u's n-th hex digit
    bool key_escaped = false;          // key: a backslash seen (additional keys have none)
    uint16_t node = 0;
    uint16_t next = 0;        // object: first declared property that may still come
    uint16_t value_node = 0;  // object: node of the value after the current key
    uint32_t count = 0;       // array: items; string: code points; number: digits of this part
    uint32_t pos = 0;         // key, literals: bytes matched
    uint64_t mask = 0;        // key: names still matching; literals: values still matching
  };

  bool feed_byte(uint8_t c);
  bool start_value(uint16_t node, uint8_t c);
  bool push(Frame f);
  void value_done();
  // 0: refused; 1: taken; 2: the closing quote.
  int string_byte(Frame& f, uint8_t c);
  bool key_byte(Frame& f, uint8_t c);
  bool close_key();
  // Object: the declared properties the next key may name (from `next` up to the first
  // required one, inclusive).
  uint64_t key_candidates(const Frame& object) const;
  bool may_close_object(const Frame& object) const;
  bool whitespace(uint8_t c);

  const JsonGrammar* g_;
  std::array<Frame, kMaxDepth> frames_;
  int depth_ = 1;
  int whitespace_run_ = 0;      // whitespace bytes of the current gap between tokens
  bool whitespace_newline_ = false;  // that gap began with a newline (then indentation may follow)
};

}  // namespace vlkv::server
