#include "server/json_recognizer.h"

namespace vlkv::server {
namespace {

// Root phases: before the value, after it.
constexpr uint8_t kRootBefore = 0;
// Object phases.
constexpr uint8_t kObjOpen = 0, kObjKeyNext = 1, kObjColon = 2, kObjValue = 3, kObjAfter = 4;
// Array phases.
constexpr uint8_t kArrOpen = 0, kArrNext = 1, kArrAfter = 2;
// Number phases (accepting: kZero, kInt, kFrac, kExp).
constexpr uint8_t kNumStart = 0, kNumMinus = 1, kNumZero = 2, kNumInt = 3, kNumDot = 4, kNumFrac = 5, kNumE = 6,
                  kNumExpSign = 7, kNumExp = 8;

bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool number_accepting(uint8_t phase) {
  return phase == kNumZero || phase == kNumInt || phase == kNumFrac || phase == kNumExp;
}
uint64_t bit(size_t i) { return uint64_t{1} << i; }

// One byte of a number: 1 taken, 0 refused, 2 the number ended before this byte.
int number_byte(uint8_t& phase, uint32_t& count, bool integer, uint8_t c) {
  const bool digit = is_digit(c);
  auto more_digits = [&](uint32_t limit) {
    if (count >= limit) return 0;
    ++count;
    return 1;
  };
  switch (phase) {
    case kNumStart:
    case kNumMinus:
      if (c == '-' && phase == kNumStart) return phase = kNumMinus, 1;
      if (c == '0') return phase = kNumZero, count = 1, 1;
      if (digit) return phase = kNumInt, count = 1, 1;
      return 0;
    case kNumZero:
    case kNumInt:
      if (digit) return phase == kNumZero ? 0 : more_digits(JsonRecognizer::kMaxDigits);
      if (!integer && c == '.') return phase = kNumDot, 1;
      if (!integer && (c == 'e' || c == 'E')) return phase = kNumE, 1;
      return 2;
    case kNumDot:
      if (digit) return phase = kNumFrac, count = 1, 1;
      return 0;
    case kNumFrac:
      if (digit) return more_digits(JsonRecognizer::kMaxDigits);
      if (c == 'e' || c == 'E') return phase = kNumE, 1;
      return 2;
    case kNumE:
      if (c == '+' || c == '-') return phase = kNumExpSign, 1;
      if (digit) return phase = kNumExp, count = 1, 1;
      return 0;
    case kNumExpSign:
      if (digit) return phase = kNumExp, count = 1, 1;
      return 0;
    case kNumExp:
      if (digit) return more_digits(2);
      return 2;
  }
  return 0;
}

}  // namespace

JsonRecognizer::JsonRecognizer(const JsonGrammar& grammar) : g_(&grammar) {
  frames_[0] = Frame{};
  frames_[0].node = grammar.root;
}

JsonRecognizer& JsonRecognizer::operator=(const JsonRecognizer& other) {
  g_ = other.g_;
  depth_ = other.depth_;
  whitespace_run_ = other.whitespace_run_;
  whitespace_newline_ = other.whitespace_newline_;
  for (int i = 0; i < depth_; ++i) frames_[i] = other.frames_[i];
  return *this;
}

bool JsonRecognizer::feed(std::string_view bytes) {
  for (char c : bytes)
    if (!feed(static_cast<uint8_t>(c))) return false;
  return true;
}

bool JsonRecognizer::feed(uint8_t c) {
  if (!feed_byte(c)) return false;
  if (!is_ws(c)) whitespace_run_ = 0;
  return true;
}

// A gap is "", " ", or "\n" and up to kMaxIndent spaces or tabs: a model that likes
// whitespace cannot spend its tokens on it.
bool JsonRecognizer::whitespace(uint8_t c) {
  if (whitespace_run_ == 0) {
    if (c != ' ' && c != '\n') return false;
    whitespace_newline_ = c == '\n';
  } else if (!whitespace_newline_ || (c != ' ' && c != '\t') || whitespace_run_ > kMaxIndent) {
    return false;
  }
  ++whitespace_run_;
  return true;
}

bool JsonRecognizer::push(Frame f) {
  if (depth_ >= kMaxDepth) return false;
  frames_[depth_++] = f;
  return true;
}

uint64_t JsonRecognizer::key_candidates(const Frame& object) const {
  const JsonNode& n = g_->nodes[object.node];
  uint64_t m = 0;
  for (size_t i = object.next; i < n.names.size(); ++i) {
    m |= bit(i);
    if (n.required & bit(i)) break;
  }
  return m;
}

bool JsonRecognizer::may_close_object(const Frame& object) const {
  const uint64_t required = g_->nodes[object.node].required;
  return object.next >= 64 || (required >> object.next) == 0;
}

bool JsonRecognizer::start_value(uint16_t node_id, uint8_t c) {
  const JsonNode& n = g_->nodes[node_id];
  Frame f;
  f.node = node_id;
  switch (n.kind) {
    case JsonNode::Kind::kAny:
      if (c == '{') return start_value(JsonGrammar::kAnyObject, c);
      if (c == '[') return start_value(JsonGrammar::kAnyArray, c);
      if (c == '"') return start_value(JsonGrammar::kAnyString, c);
      if (c == '-' || is_digit(c)) return start_value(JsonGrammar::kAnyNumber, c);
      return start_value(JsonGrammar::kAnyLiteral, c);
    case JsonNode::Kind::kObject:
      if (c != '{') return false;
      f.kind = FrameKind::kObject;
      f.phase = kObjOpen;
      return push(f);
    case JsonNode::Kind::kArray:
      if (c != '[') return false;
      f.kind = FrameKind::kArray;
      f.phase = kArrOpen;
      return push(f);
    case JsonNode::Kind::kString:
      if (c != '"') return false;
      f.kind = FrameKind::kString;
      return push(f);
    case JsonNode::Kind::kNumber:
    case JsonNode::Kind::kInteger:
      f.kind = FrameKind::kNumber;
      f.phase = kNumStart;
      if (number_byte(f.phase, f.count, n.kind == JsonNode::Kind::kInteger, c) != 1) return false;
      return push(f);
    case JsonNode::Kind::kLiterals:
      f.kind = FrameKind::kLiterals;
      for (size_t i = 0; i < n.literals.size(); ++i)
        if (!n.literals[i].empty() && static_cast<uint8_t>(n.literals[i][0]) == c) f.mask |= bit(i);
      if (f.mask == 0) return false;
      f.pos = 1;
      return push(f);
  }
  return false;
}

// A value ended (its frame is gone): its container moves on.
void JsonRecognizer::value_done() {
  Frame& p = frames_[depth_ - 1];
  switch (p.kind) {
    case FrameKind::kRoot: p.phase = 1; break;
    case FrameKind::kObject: p.phase = kObjAfter; break;
    case FrameKind::kArray:
      ++p.count;
      p.phase = kArrAfter;
      break;
    default: break;
  }
}

int JsonRecognizer::string_byte(Frame& f, uint8_t c) {
  const JsonNode& n = g_->nodes[f.kind == FrameKind::kKey ? JsonGrammar::kAnyString : f.node];
  if (f.utf8_left > 0) {
    if (c < f.utf8_lo || c > f.utf8_hi) return 0;
    f.utf8_lo = 0x80;
    f.utf8_hi = 0xBF;
    if (--f.utf8_left == 0) ++f.count;
    return 1;
  }
  if (f.escape == 1) {
    if (c == 'u') return f.escape = 2, 1;
    for (char e : {'"', '\\', '/', 'b', 'f', 'n', 'r', 't'})
      if (c == static_cast<uint8_t>(e)) return f.escape = 0, ++f.count, 1;
    return 0;
  }
  if (f.escape >= 2) {
    if (!is_hex(c)) return 0;
    // No surrogate halves (\uD800-\uDFFF): a lone one is not valid text.
    if (f.escape == 2 && (c == 'd' || c == 'D')) return f.escape = 6, 1;
    if (f.escape == 6) {  // second digit after a D: 0-7 only
      if (!(c >= '0' && c <= '7')) return 0;
      return f.escape = 4, 1;
    }
    if (++f.escape == 6) f.escape = 0, ++f.count;
    return 1;
  }
  if (c == '"') return f.count >= n.min_length ? 2 : 0;
  if (c < 0x20 || f.count >= n.max_length) return 0;
  if (c == '\\') return f.escape = 1, 1;
  if (c < 0x80) return ++f.count, 1;
  // A UTF-8 lead byte: the continuation bytes and their ranges (no overlong forms, no
  // surrogates, nothing past U+10FFFF).
  f.utf8_lo = 0x80;
  f.utf8_hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) f.utf8_left = 1;
  else if (c >= 0xE0 && c <= 0xEF) f.utf8_left = 2;
  else if (c >= 0xF0 && c <= 0xF4) f.utf8_left = 3;
  else return 0;
  if (c == 0xE0) f.utf8_lo = 0xA0;
  if (c == 0xED) f.utf8_hi = 0x9F;
  if (c == 0xF0) f.utf8_lo = 0x90;
  if (c == 0xF4) f.utf8_hi = 0x8F;
  return 1;
}

bool JsonRecognizer::key_byte(Frame& f, uint8_t c) {
  const Frame& object = frames_[depth_ - 2];
  const JsonNode& n = g_->nodes[object.node];
  const int r = string_byte(f, c);
  if (r == 0) return false;
  if (r == 2) return close_key();
  if (c == '\\' && f.escape == 1) f.key_escaped = true;
  if (n.names.empty()) return true;  // any key (the object of json_object)
  uint64_t m = 0;
  for (size_t i = 0; i < n.names.size(); ++i)
    if ((f.mask & bit(i)) && n.names[i].size() > f.pos && static_cast<uint8_t>(n.names[i][f.pos]) == c) m |= bit(i);
  f.mask = m;
  ++f.pos;
  return (m & key_candidates(object)) != 0 || (n.additional && !f.key_escaped);
}

bool JsonRecognizer::close_key() {
  const Frame key = frames_[depth_ - 1];
  Frame& object = frames_[depth_ - 2];
  const JsonNode& n = g_->nodes[object.node];
  uint64_t equal = 0;  // the declared name the key is, if any
  for (size_t i = 0; i < n.names.size(); ++i)
    if ((key.mask & bit(i)) && n.names[i].size() == key.pos) equal |= bit(i);
  if (equal & key_candidates(object)) {
    size_t i = 0;
    while (!(equal & bit(i))) ++i;
    object.next = static_cast<uint16_t>(i + 1);
    object.value_node = n.values[i];
  } else if (equal == 0 && n.additional && (!key.key_escaped || n.names.empty())) {
    object.value_node = JsonGrammar::kAnyValue;
  } else {
    return false;
  }
  --depth_;
  object.phase = kObjColon;
  return true;
}

bool JsonRecognizer::feed_byte(uint8_t c) {
  for (;;) {
    Frame& f = frames_[depth_ - 1];
    const JsonNode& n = g_->nodes[f.node];
    switch (f.kind) {
      case FrameKind::kRoot:
        if (f.phase != kRootBefore) return false;
        return whitespace(c) || start_value(f.node, c);
      case FrameKind::kObject:
        if (is_ws(c)) return whitespace(c);
        switch (f.phase) {
          case kObjOpen:
          case kObjKeyNext:
            if (c == '"') {
              if (key_candidates(f) == 0 && !n.additional) return false;
              Frame k;
              k.kind = FrameKind::kKey;
              k.node = f.node;
              k.mask = n.additional ? (n.names.size() >= 64 ? ~uint64_t{0} : bit(n.names.size()) - 1) : key_candidates(f);
              return push(k);
            }
            if (c == '}' && f.phase == kObjOpen && may_close_object(f)) {
              --depth_;
              value_done();
              return true;
            }
            return false;
          case kObjColon:
            if (c != ':') return false;
            f.phase = kObjValue;
            return true;
          case kObjValue:
            return start_value(f.value_node, c);
          case kObjAfter:
            if (c == ',' && (key_candidates(f) != 0 || n.additional)) {
              f.phase = kObjKeyNext;
              return true;
            }
            if (c == '}' && may_close_object(f)) {
              --depth_;
              value_done();
              return true;
            }
            return false;
        }
        return false;
      case FrameKind::kArray:
        if (is_ws(c)) return whitespace(c);
        if (c == ']' && ((f.phase == kArrOpen && n.min_items == 0) || (f.phase == kArrAfter && f.count >= n.min_items))) {
          --depth_;
          value_done();
          return true;
        }
        if (f.phase == kArrAfter) {
          if (c != ',' || f.count >= n.max_items) return false;
          f.phase = kArrNext;
          return true;
        }
        if (f.count >= n.max_items) return false;
        return start_value(n.items, c);
      case FrameKind::kString: {
        const int r = string_byte(f, c);
        if (r == 2) {
          --depth_;
          value_done();
        }
        return r != 0;
      }
      case FrameKind::kKey:
        return key_byte(f, c);
      case FrameKind::kNumber: {
        const int r = number_byte(f.phase, f.count, n.kind == JsonNode::Kind::kInteger, c);
        if (r != 2) return r == 1;
        if (!number_accepting(f.phase)) return false;
        --depth_;  // the number ended before c: c goes to its container
        value_done();
        continue;
      }
      case FrameKind::kLiterals: {
        uint64_t m = 0, ended = 0;
        for (size_t i = 0; i < n.literals.size(); ++i) {
          if (!(f.mask & bit(i))) continue;
          if (n.literals[i].size() > f.pos && static_cast<uint8_t>(n.literals[i][f.pos]) == c) m |= bit(i);
          if (n.literals[i].size() == f.pos) ended |= bit(i);
        }
        if (m != 0) {
          f.mask = m;
          ++f.pos;
          return true;
        }
        if (ended == 0) return false;
        --depth_;  // a value ended before c
        value_done();
        continue;
      }
    }
    return false;
  }
}

bool JsonRecognizer::complete() const {
  if (depth_ == 1) return frames_[0].phase != kRootBefore;
  if (depth_ != 2) return false;
  const Frame& f = frames_[1];
  const JsonNode& n = g_->nodes[f.node];
  if (f.kind == FrameKind::kNumber) return number_accepting(f.phase);
  if (f.kind == FrameKind::kLiterals) {
    for (size_t i = 0; i < n.literals.size(); ++i)
      if ((f.mask & bit(i)) && n.literals[i].size() == f.pos) return true;
  }
  return false;
}

}  // namespace vlkv::server
