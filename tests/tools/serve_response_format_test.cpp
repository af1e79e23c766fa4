// response_format on vlkv serve: greedy answers of the bundled models under json_object and
// several schemas parse as JSON and match the schema (checked here by a small validator of
// our own, not by the server's recognizer); a bounded schema always finishes ("stop"), and
// an answer cut by max_tokens says "length". Unsupported schema keywords: 400 by name.
#include <gtest/gtest.h>

#include "serve_util.h"

namespace vlkv {
namespace {

using nlohmann::json;
using namespace testing_serve;

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The schema subset of the server, validated the plain way: "" when value matches.
std::string violation(const json& v, const json& s) {
  if (s.contains("enum")) {
    for (const json& e : s["enum"])
      if (e == v) return "";
    return "not in enum: " + v.dump();
  }
  if (s.contains("const")) return s["const"] == v ? "" : "not the const: " + v.dump();
  if (!s.contains("type")) return "";
  const std::string t = s["type"];
  if (t == "object") {
    if (!v.is_object()) return "not an object: " + v.dump();
    const json props = s.value("properties", json::object());
    for (const json& r : s.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) return "missing " + r.dump();
    for (const auto& [k, x] : v.items()) {
      if (!props.contains(k)) {
        if (!s.value("additionalProperties", true)) return "extra key " + k;
        continue;
      }
      const std::string w = violation(x, props[k]);
      if (!w.empty()) return k + ": " + w;
    }
    return "";
  }
  if (t == "array") {
    if (!v.is_array()) return "not an array: " + v.dump();
    if (v.size() < s.value("minItems", 0u) || v.size() > s.value("maxItems", 1000000u)) return "item count";
    for (const json& x : v)
      if (s.contains("items") && !violation(x, s["items"]).empty()) return violation(x, s["items"]);
    return "";
  }
  if (t == "string") {
    if (!v.is_string()) return "not a string: " + v.dump();
    const size_t n = code_points(v.get<std::string>());
    return n >= s.value("minLength", 0u) && n <= s.value("maxLength", 1000000u) ? "" : "length of " + v.dump();
  }
  if (t == "integer") return v.is_number_integer() ? "" : "not an integer: " + v.dump();
  if (t == "number") return v.is_number() ? "" : "not a number: " + v.dump();
  if (t == "boolean") return v.is_boolean() ? "" : "not a boolean: " + v.dump();
  if (t == "null") return v.is_null() ? "" : "not null: " + v.dump();
  return "unknown type " + t;
}

// Every string, number and array here is bounded: the document must end within max_tokens.
const json kBoundedSchemas[] = {
    json::parse(R"({"type": "object", "additionalProperties": false,
                    "properties": {"answer": {"enum": ["yes", "no"]}, "confidence": {"type": "integer"},
                                   "ok": {"type": "boolean"}},
                    "required": ["answer", "confidence", "ok"]})"),
    json::parse(R"({"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 1, "maxItems": 3})"),
    json::parse(R"({"type": "object", "additionalProperties": false, "required": ["name", "pos"],
                    "properties": {
                      "name": {"type": "string", "maxLength": 12},
                      "tags": {"type": "array", "items": {"enum": ["red", "green", 3, null]}, "maxItems": 2},
                      "pos": {"type": "object", "additionalProperties": false, "required": ["x", "y"],
                              "properties": {"x": {"type": "number"}, "y": {"const": 0}}}}})"),
};

class ServeResponseFormat : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {
 protected:
  void SetUp() override {
    const std::string model = std::get<0>(GetParam()) == std::string("stories") ? stories_path() : model_path();
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{
        "-m", model, "-t", "1", "-np", "2", "--kv-budget", "32M", "--backend", std::get<1>(GetParam())});
    ASSERT_TRUE(server_->running()) << server_->log();
  }
  HttpReply chat(const json& format, int max_tokens) {
    httplib::Client c = server_->client();
    const json body = {{"messages", {{{"role", "user"}, {"content", "Describe the picture as JSON."}}}},
                       {"max_tokens", max_tokens}, {"temperature", 0}, {"response_format", format}};
    return post(c, "/v1/chat/completions", body.dump());
  }
  std::unique_ptr<ServerProcess> server_;
};

TEST_P(ServeResponseFormat, BoundedSchemasFinishValid) {
  for (const json& schema : kBoundedSchemas) {
    const json format = {{"type", "json_schema"}, {"json_schema", {{"name", "t"}, {"schema", schema}}}};
    HttpReply r = chat(format, 400);
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string text = r.json["choices"][0]["message"]["content"];
    EXPECT_EQ(r.json["choices"][0]["finish_reason"], "stop") << text;
    const json v = json::parse(text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << text;
    EXPECT_EQ(violation(v, schema), "") << schema.dump() << "\n" << text;
    // The same streamed: the same text.
    httplib::Client c = server_->client();
    const json body = {{"messages", {{{"role", "user"}, {"content", "Describe the picture as JSON."}}}},
                       {"max_tokens", 400}, {"temperature", 0}, {"response_format", format}, {"stream", true}};
    StreamReply s = post_stream(c, "/v1/chat/completions", body.dump());
    ASSERT_TRUE(s.complete);
    EXPECT_EQ(stream_text(s), text);
  }
}

TEST_P(ServeResponseFormat, JsonObjectParsesOrSaysLength) {
  HttpReply r = chat({{"type", "json_object"}}, 300);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string text = r.json["choices"][0]["message"]["content"];
  const size_t first = text.find_first_not_of(" \t\r\n");
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text[first], '{') << text;
  if (r.json["choices"][0]["finish_reason"] == "stop") {
    const json v = json::parse(text, nullptr, false);
    EXPECT_TRUE(v.is_object()) << text;
  } else {
    EXPECT_EQ(r.json["usage"]["completion_tokens"], 300) << text;
  }
}

TEST_P(ServeResponseFormat, CutByMaxTokensSaysLength) {
  const json format = {{"type", "json_schema"}, {"json_schema", {{"schema", kBoundedSchemas[0]}}}};
  HttpReply r = chat(format, 3);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r.json["usage"]["completion_tokens"], 3);
  EXPECT_TRUE(json::parse(r.json["choices"][0]["message"]["content"].get<std::string>(), nullptr, false).is_discarded());
}

TEST_P(ServeResponseFormat, UnsupportedRefusedByName) {
  const std::pair<json, std::string> refused[] = {
      {{{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "string"}, {"pattern", "a+"}}}}}}, "'pattern'"},
      {{{"type", "json_schema"}, {"json_schema", {{"schema", {{"$ref", "#/x"}}}}}}, "'$ref'"},
      {{{"type", "json_schema"}, {"json_schema", {{"schema", {{"anyOf", json::array()}}}}}}, "'anyOf'"},
      {{{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "string"}, {"format", "uri"}}}}}}, "'format'"},
      {{{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}, "'response_format.json_schema.schema'"},
      {{{"type", "regex"}}, "'response_format'"},
      {"json", "'response_format'"},
  };
  for (const auto& [format, name] : refused) {
    HttpReply r = chat(format, 4);
    EXPECT_EQ(r.status, 400) << format.dump() << ": " << r.body;
    EXPECT_NE(r.body.find(name), std::string::npos) << r.body;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ServeResponseFormat,
                         ::testing::Values(std::make_tuple("stories", "batch"), std::make_tuple("tinyvlm", "batch"),
                                           std::make_tuple("stories", "sessions")));

}  // namespace
}  // namespace vlkv
