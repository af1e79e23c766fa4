// Parses "name[:key=value,...]" spec strings (KV methods, codecs) and validates
// their keys against the accepted parameter list, so a typo names the valid ones.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vlkv/status.h"

namespace vlkv {

// What is wrong with a spec, as a kind that callers act on (the CLI names its flag from
// it and checks syntax, names and keys before a model is loaded) and a message for people.
enum class SpecErrorKind {
  kSyntax,       // not name[:key=value,...]
  kUnknownName,  // no method or codec of that name
  kUnknownKey,   // a key the method or codec does not take
  kBadValue,     // a value out of range or not one of the valid ones
  kHeadDim,      // valid parameters that this model's head_dim cannot take
  kComposition,  // "outer+inner" where the outer method does not wrap another
};
struct SpecError {
  SpecErrorKind kind;
  std::string message;
  Status status() const { return invalid_argument(message); }
};

struct ParamInfo {
  std::string name;
  std::string default_value;
  std::string help;
};

class Spec {
 public:
  // "int4:g=64,clip=0.8" -> name "int4", params {g:64, clip:0.8}. Whitespace is not allowed;
  // empty keys/values and repeated keys are InvalidArgument.
  static Result<Spec> parse(std::string_view text);

  const std::string& name() const { return name_; }
  const std::vector<std::pair<std::string, std::string>>& params() const { return params_; }
  bool has(std::string_view key) const;

  // InvalidArgument naming the unknown key and listing `accepted`.
  Status check_keys(const std::vector<ParamInfo>& accepted) const;

  // Typed getters: the default when the key is absent; InvalidArgument when the
  // value does not parse or lies outside [lo, hi].
  Result<int64_t> get_int(std::string_view key, int64_t def, int64_t lo, int64_t hi) const;
  Result<double> get_double(std::string_view key, double def, double lo, double hi) const;
  std::string get_string(std::string_view key, std::string_view def) const;

  // Canonical text: name, then params in the given order.
  std::string to_string() const;

 private:
  const std::string* find(std::string_view key) const;
  std::string name_;
  std::vector<std::pair<std::string, std::string>> params_;
};

// "a, b, c" from ParamInfo names (for error messages and help).
std::string join_param_names(const std::vector<ParamInfo>& params);

}  // namespace vlkv
