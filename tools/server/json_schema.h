// response_format for constrained decoding: {"type": "json_object"} and the subset of JSON
// Schema vlkv serve compiles (type object / array / string / number / integer / boolean /
// null, properties, required, additionalProperties, items, minItems, maxItems, minLength,
// maxLength, enum, const). Any other keyword is refused by name, never ignored.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "vlkv/status.h"

namespace vlkv::server {

// One schema node. Object properties come in their declared order (as llama.cpp's
// json-schema-to-grammar orders them): an optional one may be skipped, a required one not.
struct JsonNode {
  enum class Kind : uint8_t { kAny, kObject, kArray, kString, kNumber, kInteger, kLiterals };
  Kind kind = Kind::kAny;
  // kObject: names as they appear between the quotes (JSON-escaped), their value nodes.
  std::vector<std::string> names;
  std::vector<uint16_t> values;
  uint64_t required = 0;    // bit i: names[i] must appear
  bool additional = false;  // other keys allowed (their values: any JSON; no escapes in them)
  // kArray
  uint16_t items = 0;       // node of every item
  uint32_t min_items = 0, max_items = UINT32_MAX;
  // kString: length in code points
  uint32_t min_length = 0, max_length = UINT32_MAX;
  // kLiterals: the allowed values as compact JSON text (enum, const, true/false, null)
  std::vector<std::string> literals;
};

struct JsonGrammar {
  // The first kFixedNodes are the same in every grammar: any value, any object, any array,
  // any string, any number, and the literals true/false/null.
  static constexpr uint16_t kAnyValue = 0, kAnyObject = 1, kAnyArray = 2, kAnyString = 3, kAnyNumber = 4,
                            kAnyLiteral = 5, kFixedNodes = 6;
  std::vector<JsonNode> nodes;
  uint16_t root = kAnyObject;
};

// Limits of a compiled schema (a bigger one is refused).
constexpr int kMaxSchemaNodes = 1024;
// Schemas nested below the root (README: 24). Fewer than the documents' 31 levels
// (JsonRecognizer::kMaxDepth - 1), so a free-form value under the deepest schema can still nest.
constexpr int kMaxSchemaDepth = 24;
constexpr int kMaxSchemaProperties = 64;  // per object
constexpr int kMaxSchemaLiterals = 64;    // per enum

// {"type": "json_object"}: any JSON object.
JsonGrammar json_object_grammar();
// {"type": "json_schema", "json_schema": {"schema": schema}}: InvalidArgument naming the
// keyword or value that is not supported.
Result<JsonGrammar> compile_json_schema(const nlohmann::json& schema);

// A request's "response_format": null for {"type": "text"}, the grammar for "json_object"
// and "json_schema" ({"json_schema": {"schema": {...}, "name", "description", "strict"}}).
// InvalidArgument names the field (and the schema keyword) that is refused.
Result<std::shared_ptr<const JsonGrammar>> parse_response_format(const nlohmann::json& value);

}  // namespace vlkv::server
