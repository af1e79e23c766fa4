#include "server/json_schema.h"

namespace vlkv::server {
namespace {

using nlohmann::json;

JsonGrammar fixed_nodes() {
  JsonGrammar g;
  g.nodes.resize(JsonGrammar::kFixedNodes);
  g.nodes[JsonGrammar::kAnyValue].kind = JsonNode::Kind::kAny;
  g.nodes[JsonGrammar::kAnyObject].kind = JsonNode::Kind::kObject;
  g.nodes[JsonGrammar::kAnyObject].additional = true;
  g.nodes[JsonGrammar::kAnyArray].kind = JsonNode::Kind::kArray;
  g.nodes[JsonGrammar::kAnyString].kind = JsonNode::Kind::kString;
  g.nodes[JsonGrammar::kAnyNumber].kind = JsonNode::Kind::kNumber;
  g.nodes[JsonGrammar::kAnyLiteral].kind = JsonNode::Kind::kLiterals;
  g.nodes[JsonGrammar::kAnyLiteral].literals = {"true", "false", "null"};
  return g;
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(JsonGrammar& g) : g_(g) {}

  Result<uint16_t> compile(const json& s, int depth) {
    if (depth > kMaxSchemaDepth) return invalid_argument("the schema nests deeper than " + std::to_string(kMaxSchemaDepth));
    if (s.is_boolean()) {
      if (s.get<bool>()) return JsonGrammar::kAnyValue;
      return invalid_argument("the schema 'false' matches nothing");
    }
    if (!s.is_object()) return invalid_argument("a schema must be an object");
    for (const auto& [key, value] : s.items()) {
      static const char* const kKnown[] = {"type", "properties", "required", "additionalProperties", "items",
                                           "minItems", "maxItems", "minLength", "maxLength", "enum", "const",
                                           "title", "description", "$schema", "$id", "$comment", "examples", "default"};
      bool known = false;
      for (const char* k : kKnown) known = known || key == k;
      if (!known) return invalid_argument("JSON Schema keyword '" + key.substr(0, 64) + "' is not supported in response_format");
    }
    if (s.contains("enum") || s.contains("const")) return literals(s);
    if (!s.contains("type")) {
      for (const char* k : {"properties", "required", "additionalProperties", "items", "minItems", "maxItems",
                            "minLength", "maxLength"})
        if (s.contains(k)) return invalid_argument(std::string("a schema with '") + k + "' needs a 'type'");
      return JsonGrammar::kAnyValue;
    }
    if (!s["type"].is_string()) return invalid_argument("'type' must be one string (type lists are not supported)");
    const std::string type = s["type"].get<std::string>();
    auto only = [&](std::initializer_list<const char*> allowed) -> Status {
      static const char* const kSized[] = {"properties", "required", "additionalProperties", "items",
                                           "minItems", "maxItems", "minLength", "maxLength"};
      for (const char* k : kSized) {
        if (!s.contains(k)) continue;
        bool ok = false;
        for (const char* a : allowed) ok = ok || std::string(a) == k;
        if (!ok) return invalid_argument(std::string("'") + k + "' does not apply to type '" + type + "'");
      }
      return Status::ok();
    };
    JsonNode n;
    if (type == "object") {
      VLKV_RETURN_IF_ERROR(only({"properties", "required", "additionalProperties"}));
      return object(s, depth);
    } else if (type == "array") {
      VLKV_RETURN_IF_ERROR(only({"items", "minItems", "maxItems"}));
      n.kind = JsonNode::Kind::kArray;
      n.items = JsonGrammar::kAnyValue;
      if (s.contains("items")) {
        VLKV_ASSIGN_OR_RETURN(n.items, compile(s["items"], depth + 1));
      }
      VLKV_RETURN_IF_ERROR(bound(s, "minItems", &n.min_items));
      VLKV_RETURN_IF_ERROR(bound(s, "maxItems", &n.max_items));
      if (n.min_items > n.max_items) return invalid_argument("'minItems' is above 'maxItems'");
    } else if (type == "string") {
      VLKV_RETURN_IF_ERROR(only({"minLength", "maxLength"}));
      n.kind = JsonNode::Kind::kString;
      VLKV_RETURN_IF_ERROR(bound(s, "minLength", &n.min_length));
      VLKV_RETURN_IF_ERROR(bound(s, "maxLength", &n.max_length));
      if (n.min_length > n.max_length) return invalid_argument("'minLength' is above 'maxLength'");
    } else if (type == "number" || type == "integer") {
      VLKV_RETURN_IF_ERROR(only({}));
      n.kind = type == "number" ? JsonNode::Kind::kNumber : JsonNode::Kind::kInteger;
    } else if (type == "boolean" || type == "null") {
      VLKV_RETURN_IF_ERROR(only({}));
      n.kind = JsonNode::Kind::kLiterals;
      n.literals = type == "null" ? std::vector<std::string>{"null"} : std::vector<std::string>{"true", "false"};
    } else {
      return invalid_argument("schema type '" + type.substr(0, 64) + "' is not supported");
    }
    return add(std::move(n));
  }

 private:
  Result<uint16_t> add(JsonNode n) {
    if (static_cast<int>(g_.nodes.size()) >= kMaxSchemaNodes)
      return invalid_argument("the schema has more than " + std::to_string(kMaxSchemaNodes) + " parts");
    g_.nodes.push_back(std::move(n));
    return static_cast<uint16_t>(g_.nodes.size() - 1);
  }

  static Status bound(const json& s, const char* key, uint32_t* out) {
    if (!s.contains(key)) return Status::ok();
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 1000000)
      return invalid_argument(std::string("'") + key + "' must be an integer in [0, 1000000]");
    *out = static_cast<uint32_t>(v.get<int64_t>());
    return Status::ok();
  }

  Result<uint16_t> literals(const json& s) {
    if (s.contains("type")) return invalid_argument("'enum' or 'const' with a 'type' is not supported (give one of them)");
    for (const char* k : {"properties", "required", "additionalProperties", "items", "minItems", "maxItems",
                          "minLength", "maxLength"})
      if (s.contains(k)) return invalid_argument(std::string("'") + k + "' next to 'enum'/'const' is not supported");
    if (s.contains("enum") && s.contains("const")) return invalid_argument("give 'enum' or 'const', not both");
    JsonNode n;
    n.kind = JsonNode::Kind::kLiterals;
    if (s.contains("const")) {
      n.literals.push_back(s["const"].dump());
    } else {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) return invalid_argument("'enum' must be a non-empty array");
      if (e.size() > static_cast<size_t>(kMaxSchemaLiterals))
        return invalid_argument("'enum' has more than " + std::to_string(kMaxSchemaLiterals) + " values");
      for (const json& v : e) n.literals.push_back(v.dump());
    }
    for (const std::string& l : n.literals)
      if (l.size() > 4096) return invalid_argument("an 'enum'/'const' value is longer than 4096 bytes");
    return add(std::move(n));
  }

  Result<uint16_t> object(const json& s, int depth) {
    JsonNode n;
    n.kind = JsonNode::Kind::kObject;
    n.additional = true;  // JSON Schema's default
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (!a.is_boolean()) return invalid_argument("'additionalProperties' must be true or false (schemas are not supported)");
      n.additional = a.get<bool>();
    }
    if (s.contains("properties")) {
      const json& p = s["properties"];
      if (!p.is_object()) return invalid_argument("'properties' must be an object");
      if (p.size() > static_cast<size_t>(kMaxSchemaProperties))
        return invalid_argument("an object schema has more than " + std::to_string(kMaxSchemaProperties) + " properties");
      // nlohmann's object iterates keys sorted; the declared order is not kept by the parser, so
      // the properties come in the order of their names (documented in README).
      for (const auto& [name, sub] : p.items()) {
        const std::string quoted = json(name).dump();
        n.names.push_back(quoted.substr(1, quoted.size() - 2));
        VLKV_ASSIGN_OR_RETURN(uint16_t child, compile(sub, depth + 1));
        n.values.push_back(child);
      }
    }
    if (s.contains("required")) {
      const json& r = s["required"];
      if (!r.is_array()) return invalid_argument("'required' must be an array of property names");
      for (const json& name : r) {
        if (!name.is_string()) return invalid_argument("'required' must be an array of property names");
        const std::string quoted = name.dump();
        const std::string raw = quoted.substr(1, quoted.size() - 2);
        size_t i = 0;
        while (i < n.names.size() && n.names[i] != raw) ++i;
        if (i == n.names.size())
          return invalid_argument("required property '" + name.get<std::string>().substr(0, 64) + "' is not in 'properties'");
        n.required |= uint64_t{1} << i;
      }
    }
    return add(std::move(n));
  }

  JsonGrammar& g_;
};

}  // namespace

JsonGrammar json_object_grammar() {
  JsonGrammar g = fixed_nodes();
  g.root = JsonGrammar::kAnyObject;
  return g;
}

Result<JsonGrammar> compile_json_schema(const json& schema) {
  JsonGrammar g = fixed_nodes();
  SchemaCompiler c(g);
  VLKV_ASSIGN_OR_RETURN(g.root, c.compile(schema, 0));
  return g;
}

Result<std::shared_ptr<const JsonGrammar>> parse_response_format(const json& v) {
  const std::string bad = "'response_format' must be {\"type\": \"text\" | \"json_object\" | \"json_schema\"}";
  if (v.is_null()) return std::shared_ptr<const JsonGrammar>();
  if (!v.is_object() || !v.contains("type") || !v["type"].is_string()) return invalid_argument(bad);
  const std::string type = v["type"].get<std::string>();
  for (const auto& [key, value] : v.items())
    if (key != "type" && !(type == "json_schema" && key == "json_schema"))
      return invalid_argument("'response_format." + key.substr(0, 64) + "' is not supported");
  if (type == "text") return std::shared_ptr<const JsonGrammar>();
  if (type == "json_object") return std::make_shared<const JsonGrammar>(json_object_grammar());
  if (type != "json_schema") return invalid_argument(bad);
  if (!v.contains("json_schema") || !v["json_schema"].is_object())
    return invalid_argument("'response_format.json_schema' must be an object with a 'schema'");
  const json& js = v["json_schema"];
  for (const auto& [key, value] : js.items())
    if (key != "schema" && key != "name" && key != "description" && key != "strict")
      return invalid_argument("'response_format.json_schema." + key.substr(0, 64) + "' is not supported");
  if (!js.contains("schema")) return invalid_argument("'response_format.json_schema.schema' is required");
  Result<JsonGrammar> g = compile_json_schema(js["schema"]);
  if (!g.is_ok()) return invalid_argument("'response_format.json_schema.schema': " + g.status().message());
  return std::make_shared<const JsonGrammar>(std::move(g).value());
}

}  // namespace vlkv::server
