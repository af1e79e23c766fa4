// The response_format recognizer (tools/server/json_recognizer.h): whole documents accepted,
// bad bytes refused where they occur, and random documents (nlohmann's dump, compact and
// indented) accepted by json_object and by a schema inferred from them; anything it calls
// complete parses (nlohmann is the independent judge).
#include "server/json_recognizer.h"

#include <gtest/gtest.h>

#include <random>

#include "server/token_mask.h"

namespace vlkv::server {
namespace {

using nlohmann::json;

JsonGrammar schema(const json& s) {
  Result<JsonGrammar> g = compile_json_schema(s);
  EXPECT_TRUE(g.is_ok()) << s.dump() << ": " << g.status().message();
  return g.is_ok() ? std::move(g).value() : json_object_grammar();
}

// How many bytes of text the grammar takes before refusing one (text.size(): all).
size_t accepted_prefix(const JsonGrammar& g, const std::string& text, bool* complete = nullptr) {
  JsonRecognizer r(g);
  size_t i = 0;
  while (i < text.size() && r.feed(static_cast<uint8_t>(text[i]))) ++i;
  if (complete) *complete = i == text.size() && r.complete();
  return i;
}

bool accepts(const JsonGrammar& g, const std::string& text) {
  bool complete = false;
  accepted_prefix(g, text, &complete);
  return complete;
}

TEST(JsonRecognizer, JsonObjectWholeDocuments) {
  const JsonGrammar g = json_object_grammar();
  for (const char* ok : {"{}", "{\"a\":1}", " {\"a\": [1, -2.5e+3, true, null, \"x\\n\\u00e9\"], \"b\": {}}",
                         "{\"\xc3\xa9\":\"\xf0\x9f\x98\x80\"}", "{\"a\":{\"b\":{\"c\":[[],[{}]]}}}"})
    EXPECT_TRUE(accepts(g, ok)) << ok;
  // Refused at the byte that breaks it.
  const std::pair<const char*, size_t> bad[] = {
      {"[1]", 0},          {"{'a':1}", 1},        {"{\"a\" 1}", 5},      {"{\"a\":01}", 6},
      {"{\"a\":1,}", 7},   {"{\"a\":tru}", 8},    {"{\"a\":\"\x01\"}", 6}, {"{\"a\":\"\\x\"}", 7},
      {"{\"a\":\"\xc0\xaf\"}", 6}, {"{\"a\":\"\xed\xa0\x80\"}", 7}, {"{\"a\":\"\\ud800\"}", 9},
      {"{} ", 2},          {"{}{}", 2},           {"{\"a\":1.}", 7},     {"{\"a\":-}", 6},
  };
  for (const auto& [text, at] : bad) EXPECT_EQ(accepted_prefix(g, text), at) << text;
  EXPECT_FALSE(accepts(g, "{\"a\":1"));  // a prefix, not complete
  EXPECT_EQ(accepted_prefix(g, "{\"a\":1"), 6u);
}

TEST(JsonRecognizer, BoundsOnWhitespaceDigitsAndDepth) {
  const JsonGrammar g = json_object_grammar();
  // Between tokens: nothing, one space, or a newline and an indentation (as llama.cpp's json.gbnf).
  const std::string indent = "\n" + std::string(JsonRecognizer::kMaxIndent - 1, ' ') + "\t";
  EXPECT_TRUE(accepts(g, "{" + indent + "}"));
  EXPECT_EQ(accepted_prefix(g, "{" + indent + " }"), 1 + indent.size());
  EXPECT_TRUE(accepts(g, " { \"a\" : 1 }"));
  EXPECT_EQ(accepted_prefix(g, "{  }"), 2u);
  EXPECT_EQ(accepted_prefix(g, "{ \n}"), 2u);
  EXPECT_EQ(accepted_prefix(g, "{\t}"), 1u);
  EXPECT_EQ(accepted_prefix(g, "{\n\n}"), 2u);
  const std::string digits(JsonRecognizer::kMaxDigits, '7');
  EXPECT_TRUE(accepts(g, "{\"n\":" + digits + "}"));
  EXPECT_FALSE(accepts(g, "{\"n\":" + digits + "7}"));
  EXPECT_TRUE(accepts(g, "{\"n\":1e99}"));
  EXPECT_FALSE(accepts(g, "{\"n\":1e999}"));
  std::string deep = "{\"a\":";
  for (int i = 0; i < JsonRecognizer::kMaxDepth; ++i) deep += "[";
  EXPECT_LT(accepted_prefix(g, deep), deep.size());
}

TEST(JsonRecognizer, SchemaObjects) {
  const JsonGrammar g = schema({{"type", "object"},
                                {"properties",
                                 {{"age", {{"type", "integer"}}},
                                  {"name", {{"type", "string"}, {"maxLength", 3}}},
                                  {"tags", {{"type", "array"}, {"items", {{"enum", {"x", "y"}}}}, {"maxItems", 2}}}}},
                                {"required", {"name"}},
                                {"additionalProperties", false}});
  // Properties in their (name) order; optional ones may be skipped, required ones not.
  EXPECT_TRUE(accepts(g, "{\"name\":\"bob\"}"));
  EXPECT_TRUE(accepts(g, "{\"age\":3,\"name\":\"\",\"tags\":[\"x\",\"y\"]}"));
  EXPECT_TRUE(accepts(g, "{ \"age\" : 3 , \"name\" : \"b\" }"));
  EXPECT_FALSE(accepts(g, "{}"));                             // name is required
  EXPECT_FALSE(accepts(g, "{\"age\":3}"));
  EXPECT_EQ(accepted_prefix(g, "{\"nope\":1}"), 3u);          // no such property
  EXPECT_EQ(accepted_prefix(g, "{\"name\":\"bobby\"}"), 12u);  // maxLength 3
  EXPECT_EQ(accepted_prefix(g, "{\"age\":3.5,\"name\":\"\"}"), 8u);  // integer
  EXPECT_EQ(accepted_prefix(g, "{\"name\":\"\",\"age\":1}"), 12u);   // declared order
  EXPECT_EQ(accepted_prefix(g, "{\"name\":\"\",\"tags\":[\"z\"]}"), 20u);  // enum
  EXPECT_EQ(accepted_prefix(g, "{\"name\":\"\",\"tags\":[\"x\",\"x\",\"x\"]}"), 26u);  // maxItems
  EXPECT_EQ(accepted_prefix(g, "{\"name\":\"\",\"name\":\"\"}"), 12u);  // nothing after name but tags
  // additionalProperties true: other keys (any value), but not a declared name out of order.
  const JsonGrammar open = schema({{"type", "object"},
                                   {"properties", {{"b", {{"type", "boolean"}}}}},
                                   {"required", {"b"}}});
  EXPECT_TRUE(accepts(open, "{\"x\":[1,{\"y\":null}],\"b\":true,\"zz\":\"q\"}"));
  EXPECT_FALSE(accepts(open, "{\"b\":true,\"b\":false}"));
  EXPECT_FALSE(accepts(open, "{\"x\":1}"));
}

TEST(JsonRecognizer, SchemaScalarsAndLists) {
  EXPECT_TRUE(accepts(schema({{"type", "number"}}), "-0.5E-7"));
  EXPECT_TRUE(accepts(schema({{"type", "integer"}}), "42"));
  EXPECT_FALSE(accepts(schema({{"type", "integer"}}), "4e2"));
  EXPECT_TRUE(accepts(schema({{"type", "null"}}), "null"));
  EXPECT_FALSE(accepts(schema({{"type", "boolean"}}), "null"));
  EXPECT_TRUE(accepts(schema({{"const", {{"k", {1, 2}}}}}), "{\"k\":[1,2]}"));
  const JsonGrammar e = schema({{"enum", {1, 10, "a", nullptr}}});
  for (const char* ok : {"1", "10", "\"a\"", "null"}) EXPECT_TRUE(accepts(e, ok)) << ok;
  for (const char* no : {"100", "2", "\"b\"", "true"}) EXPECT_FALSE(accepts(e, no)) << no;
  const JsonGrammar a = schema({{"type", "array"}, {"items", {{"type", "string"}, {"minLength", 1}}},
                                {"minItems", 1}, {"maxItems", 2}});
  EXPECT_TRUE(accepts(a, "[\"a\"]"));
  EXPECT_TRUE(accepts(a, "[\"a\", \"b\"]"));
  EXPECT_FALSE(accepts(a, "[]"));
  EXPECT_FALSE(accepts(a, "[\"\"]"));
  EXPECT_FALSE(accepts(a, "[\"a\",\"b\",\"c\"]"));
  // A top-level number is complete but may go on; an object is finished.
  const JsonGrammar integer = schema({{"type", "integer"}}), object = json_object_grammar();
  JsonRecognizer n(integer);
  ASSERT_TRUE(n.feed("12"));
  EXPECT_TRUE(n.complete());
  EXPECT_FALSE(n.finished());
  JsonRecognizer o(object);
  ASSERT_TRUE(o.feed("{}"));
  EXPECT_TRUE(o.finished());
}

// README: "schemas nested up to 24 levels below the root, documents up to 31 levels".
TEST(JsonSchema, NestingLimitsAsDocumented) {
  auto arrays = [](int levels) {
    json s = {{"type", "integer"}};
    for (int i = 0; i < levels; ++i) s = {{"type", "array"}, {"items", s}};
    return s;
  };
  Result<JsonGrammar> deepest = compile_json_schema(arrays(24));
  ASSERT_TRUE(deepest.is_ok()) << deepest.status().message();
  EXPECT_TRUE(accepts(*deepest, std::string(24, '[') + "1" + std::string(24, ']')));
  Result<JsonGrammar> deeper = compile_json_schema(arrays(25));
  ASSERT_FALSE(deeper.is_ok());
  EXPECT_NE(deeper.status().message().find("24"), std::string::npos) << deeper.status().message();
  const JsonGrammar any = json_object_grammar();
  EXPECT_TRUE(accepts(any, "{\"a\":" + std::string(30, '[') + std::string(30, ']') + "}"));
  EXPECT_FALSE(accepts(any, "{\"a\":" + std::string(31, '[') + std::string(31, ']') + "}"));
}

TEST(JsonSchema, UnsupportedKeywordsRefusedByName) {
  const std::pair<json, std::string> refused[] = {
      {{{"type", "string"}, {"pattern", "^a"}}, "'pattern'"},
      {{{"$ref", "#/defs/a"}}, "'$ref'"},
      {{{"anyOf", {{{"type", "string"}}}}}, "'anyOf'"},
      {{{"type", "string"}, {"format", "date"}}, "'format'"},
      {{{"type", "number"}, {"minimum", 0}}, "'minimum'"},
      {{{"type", {"string", "null"}}}, "type lists"},
      {{{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}, "'additionalProperties'"},
      {{{"type", "object"}, {"required", {"x"}}}, "'x'"},
      {{{"type", "string"}, {"items", {{"type", "string"}}}}, "'items'"},
      {{{"type", "date"}}, "'date'"},
  };
  for (const auto& [s, name] : refused) {
    Result<JsonGrammar> g = compile_json_schema(s);
    ASSERT_FALSE(g.is_ok()) << s.dump();
    EXPECT_NE(g.status().message().find(name), std::string::npos) << s.dump() << ": " << g.status().message();
  }
  Result<std::shared_ptr<const JsonGrammar>> rf =
      parse_response_format({{"type", "json_schema"}, {"json_schema", {{"schema", {{"not", {}}}}}}});
  ASSERT_FALSE(rf.is_ok());
  EXPECT_NE(rf.status().message().find("'not'"), std::string::npos) << rf.status().message();
  EXPECT_FALSE(parse_response_format({{"type", "json_object"}, {"extra", 1}}).is_ok());
  EXPECT_TRUE(parse_response_format({{"type", "text"}}).is_ok());
}

// Random JSON values (seeded), with the schema that describes each.
struct RandomJson {
  std::mt19937 rng{1234};
  int pick(int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); }
  std::string word() {
    static const char* const kWords[] = {"a", "bc", "caf\xc3\xa9", "q\"uote", "back\\slash", "tab\t", "\xf0\x9f\x98\x80",
                                         "x y", ""};
    return kWords[pick(9)];
  }
  json value(int depth, json* schema) {
    const int kind = depth >= 4 ? 2 + pick(5) : pick(7);
    switch (kind) {
      case 0: {
        json o = json::object(), props = json::object(), req = json::array();
        const int n = pick(4);
        for (int i = 0; i < n; ++i) {
          std::string k(1, 'k');  // (not "k" + ...: GCC 12's false -Wrestrict, bug 105329)
          k += std::to_string(pick(6));
          json sub;
          o[k] = value(depth + 1, &sub);
          props[k] = sub;
          if (pick(2)) req.push_back(k);
        }
        *schema = {{"type", "object"}, {"properties", props}, {"required", req}, {"additionalProperties", false}};
        return o;
      }
      case 1: {
        json a = json::array();
        json items;
        const int n = pick(4);
        for (int i = 0; i < n; ++i) a.push_back(value(depth + 1, &items));  // items: the last one's schema
        if (n > 1) items = json::object();  // mixed items: any value
        *schema = {{"type", "array"}, {"maxItems", n}};
        if (n == 1) (*schema)["items"] = items;
        return a;
      }
      case 2: *schema = {{"type", "string"}}; return word();
      case 3: *schema = {{"type", "integer"}}; return static_cast<int64_t>(rng() % 200000) - 100000;
      case 4: *schema = {{"type", "number"}}; return (static_cast<double>(rng()) - 2e9) / 977.0;
      case 5: *schema = {{"type", "boolean"}}; return pick(2) == 0;
      default: {
        json v = pick(2) ? json(word()) : json(pick(100));
        *schema = {{"enum", {v, "other", 3.5}}};
        return v;
      }
    }
  }
};

TEST(JsonRecognizer, RandomDocumentsRoundTrip) {
  RandomJson r;
  const JsonGrammar any_object = json_object_grammar();
  int n_objects = 0;
  for (int i = 0; i < 400; ++i) {
    json s;
    const json v = r.value(0, &s);
    const JsonGrammar g = schema(s);
    for (int indent : {-1, 1}) {
      const std::string text = v.dump(indent);
      EXPECT_TRUE(accepts(g, text)) << s.dump() << "\n" << text;
      if (v.is_object()) {
        EXPECT_TRUE(accepts(any_object, text)) << text;
      }
    }
    n_objects += v.is_object();
  }
  EXPECT_GT(n_objects, 40);
}

TEST(JsonRecognizer, WhatItCallsCompleteParses) {
  // Byte mutations of random documents: whenever the recognizer takes every byte and calls
  // the result complete, nlohmann parses it (and, for json_object, as an object).
  RandomJson r;
  const JsonGrammar g = json_object_grammar();
  std::mt19937 rng(99);
  const std::string alphabet = "{}[]:,\"\\ -.eE0123456789aeflnrstu\x01\xc3\xa9\xf0\x9f\x98\x80";
  int n_complete = 0;
  for (int i = 0; i < 3000; ++i) {
    json s;
    json v = json::object({{"k", r.value(1, &s)}});
    std::string text = v.dump();
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % (text.size() + 1);
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        case 1: if (at < text.size()) text.erase(at, 1); break;
        default: if (at < text.size()) text[at] = c;
      }
    }
    if (!accepts(g, text)) continue;
    ++n_complete;
    const json parsed = json::parse(text, nullptr, false);
    EXPECT_FALSE(parsed.is_discarded()) << text;
    EXPECT_TRUE(parsed.is_object()) << text;
  }
  EXPECT_GT(n_complete, 100);  // the check above ran on many mutants
}

TEST(TokenMask, AllowedTokensFromAState) {
  // A made-up vocabulary: ids 0-8, id 9 ends generation.
  TokenTable t;
  t.pieces = {"{", "}", "\"a\"", ":", "1", " ", "x", "{\"", "\"a\":1}", ""};
  t.end_of_generation = {9};
  for (int32_t id = 0; id < 9; ++id) t.order.push_back(id);
  std::sort(t.order.begin(), t.order.end(), [&](int32_t a, int32_t b) { return t.pieces[a] < t.pieces[b]; });
  t.common.assign(t.order.size(), 0);
  for (size_t i = 1; i < t.order.size(); ++i) {
    const std::string &a = t.pieces[t.order[i - 1]], &b = t.pieces[t.order[i]];
    while (t.common[i] < a.size() && t.common[i] < b.size() && a[t.common[i]] == b[t.common[i]]) ++t.common[i];
  }
  for (const std::string& p : t.pieces) t.max_piece = std::max(t.max_piece, p.size());
  const JsonGrammar g = json_object_grammar();
  std::vector<JsonRecognizer> scratch;
  std::vector<uint8_t> allowed;
  auto allowed_ids = [&](const std::string& so_far) {
    JsonRecognizer r(g);
    EXPECT_TRUE(r.feed(so_far)) << so_far;
    allowed_tokens(t, r, scratch, &allowed);
    std::vector<int> ids;
    for (size_t i = 0; i < allowed.size(); ++i)
      if (allowed[i]) ids.push_back(static_cast<int>(i));
    return ids;
  };
  EXPECT_EQ(allowed_ids(""), (std::vector<int>{0, 5, 7}));
  EXPECT_EQ(allowed_ids("{"), (std::vector<int>{1, 2, 5, 8}));
  EXPECT_EQ(allowed_ids("{\"a\""), (std::vector<int>{3, 5}));
  EXPECT_EQ(allowed_ids("{\"a\":"), (std::vector<int>{0, 2, 4, 5, 7}));
  EXPECT_EQ(allowed_ids("{\"a\":1"), (std::vector<int>{1, 4, 5}));
  EXPECT_EQ(allowed_ids("{}"), (std::vector<int>{}));
}

}  // namespace
}  // namespace vlkv::server
