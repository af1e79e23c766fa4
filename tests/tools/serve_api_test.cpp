// llama-server's API beside OpenAI's: /v1/models/{id}, /tokenize, /detokenize, /props,
// CORS (--cors-origin), x-request-id, parameters we do not implement refused by name, and
// one structured log line per request.
#include <gtest/gtest.h>

#include "serve_raw.h"
#include "serve_util.h"

namespace vlkv {
namespace {

using nlohmann::json;
using namespace testing_serve;

class ServeApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess({"-m", stories_path(), "-t", "1", "-np", "2", "--kv-budget", "16M", "--api-key",
                                 "secret", "--alias", "tiny", "--kv-allow", "kivi2", "--cors-origin",
                                 "http://page.test"});
  }
  static void TearDownTestSuite() { delete server_; }
  void SetUp() override { ASSERT_TRUE(server_->running()) << server_->log(); }
  static httplib::Headers auth() { return {{"Authorization", "Bearer secret"}}; }
  static HttpReply post_json(const std::string& path, const json& body) {
    httplib::Client c = server_->client();
    return post(c, path, body.dump(), auth());
  }
  static ServerProcess* server_;
};
ServerProcess* ServeApi::server_ = nullptr;

TEST_F(ServeApi, ModelById) {
  httplib::Client c = server_->client();
  HttpReply list = get(c, "/v1/models", auth());
  ASSERT_EQ(list.status, 200) << list.body;
  HttpReply one = get(c, "/v1/models/tiny", auth());
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.json["id"], "tiny");
  EXPECT_EQ(one.json["object"], "model");
  EXPECT_GT(one.json["created"].get<int64_t>(), 1700000000);
  EXPECT_EQ(one.json["created"], list.json["data"][0]["created"]);
  EXPECT_EQ(get(c, "/models/tiny", auth()).status, 200);
  HttpReply other = get(c, "/v1/models/gpt-4", auth());
  EXPECT_EQ(other.status, 404) << other.body;
  EXPECT_EQ(other.json["error"]["type"], "not_found_error");
  EXPECT_EQ(get(c, "/v1/models/tiny").status, 401);
}

TEST_F(ServeApi, TokenizeAndDetokenize) {
  HttpReply t = post_json("/tokenize", {{"content", "Once upon a time"}});
  ASSERT_EQ(t.status, 200) << t.body;
  ASSERT_TRUE(t.json["tokens"].is_array() && !t.json["tokens"].empty()) << t.body;
  for (const json& id : t.json["tokens"]) EXPECT_TRUE(id.is_number_integer());
  HttpReply d = post_json("/detokenize", {{"tokens", t.json["tokens"]}});
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(d.json["content"].get<std::string>().find("Once upon a time") != std::string::npos, true) << d.body;
  // add_special prepends BOS; with_pieces gives each token's text.
  HttpReply bos = post_json("/tokenize", {{"content", "Once"}, {"add_special", true}, {"with_pieces", true}});
  ASSERT_EQ(bos.status, 200) << bos.body;
  ASSERT_TRUE(bos.json["tokens"][0].contains("piece")) << bos.body;
  HttpReply plain = post_json("/tokenize", {{"content", "Once"}});
  EXPECT_EQ(bos.json["tokens"].size(), plain.json["tokens"].size() + 1) << bos.body << plain.body;
  // Wrong shapes are 400s naming the field.
  EXPECT_EQ(post_json("/tokenize", {{"text", "x"}}).status, 400);
  EXPECT_EQ(post_json("/tokenize", {{"content", 5}}).status, 400);
  HttpReply bad = post_json("/detokenize", {{"tokens", {1, 2, 99999999}}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.json["error"]["message"].get<std::string>().find("tokens"), std::string::npos) << bad.body;
  EXPECT_EQ(post_json("/detokenize", {{"tokens", "abc"}}).status, 400);
}

TEST_F(ServeApi, Props) {
  httplib::Client c = server_->client();
  HttpReply p = get(c, "/props", auth());
  ASSERT_EQ(p.status, 200) << p.body;
  EXPECT_EQ(p.json["model"], "tiny");
  EXPECT_GT(p.json["n_ctx"].get<int64_t>(), 0);
  EXPECT_EQ(p.json["default_generation_settings"]["n_ctx"], p.json["n_ctx"]);
  EXPECT_EQ(p.json["total_slots"], 2);
  EXPECT_EQ(p.json["modalities"]["vision"], false);
  EXPECT_EQ(p.json["kv"]["default"], "f16");
  EXPECT_EQ(p.json["kv"]["allowed"], json({"f16", "kivi2"}));
  EXPECT_EQ(p.json["kv"]["budget_bytes"].get<uint64_t>(), 16u << 20) << p.body;
  EXPECT_FALSE(p.json["kv"]["methods"].empty());
  EXPECT_EQ(get(c, "/props").status, 401);
}

TEST_F(ServeApi, UnsupportedParametersRefusedByName) {
  const json base = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}};
  const std::vector<std::pair<std::string, json>> refused = {
      {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
      {"n_probs", 5},
      {"tool_choice", "auto"},
      {"logit_bias", {{"50256", -100}}},
      {"grammar", "root ::= \"a\""},
      {"some_new_field", 1},
  };
  for (const auto& [key, value] : refused) {
    json body = base;
    body[key] = value;
    HttpReply r = post_json("/v1/chat/completions", body);
    EXPECT_EQ(r.status, 400) << key << ": " << r.body;
    EXPECT_NE(r.body.find("'" + key + "'"), std::string::npos) << r.body;
  }
  json completion = {{"prompt", "Once"}, {"max_tokens", 2}, {"best_of", 2}};
  HttpReply r = post_json("/v1/completions", completion);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("'best_of'"), std::string::npos) << r.body;
  // The values that ask for nothing, as some clients send them by default, are accepted.
  json neutral = base;
  neutral.update({{"logprobs", false}, {"top_logprobs", 0}, {"response_format", {{"type", "text"}}},
                  {"tools", json::array()}, {"n_probs", 0}, {"user", "u1"}, {"cache_prompt", true}});
  HttpReply ok = post_json("/v1/chat/completions", neutral);
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST_F(ServeApi, RequestIdEchoedOrMade) {
  httplib::Client c = server_->client();
  auto given = c.Get("/health", {{"X-Request-Id", "client-id-42"}});
  ASSERT_TRUE(given);
  EXPECT_EQ(given->get_header_value("x-request-id"), "client-id-42");
  auto made = c.Get("/health");
  auto made2 = c.Get("/health");
  ASSERT_TRUE(made && made2);
  EXPECT_FALSE(made->get_header_value("x-request-id").empty());
  EXPECT_NE(made->get_header_value("x-request-id"), made2->get_header_value("x-request-id"));
  auto refused = c.Get("/props");  // no key: the 401 carries one too
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  EXPECT_FALSE(refused->get_header_value("x-request-id").empty());
}

TEST_F(ServeApi, Cors) {
  httplib::Client c = server_->client();
  // Preflight: answered without the key, for the configured origin only.
  httplib::Headers preflight = {{"Origin", "http://page.test"},
                                {"Access-Control-Request-Method", "POST"},
                                {"Access-Control-Request-Headers", "authorization, content-type"}};
  auto p = c.Options("/v1/chat/completions", preflight);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->status, 204);
  EXPECT_EQ(p->get_header_value("Access-Control-Allow-Origin"), "http://page.test");
  EXPECT_NE(p->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_NE(p->get_header_value("Access-Control-Allow-Headers").find("authorization"), std::string::npos);
  auto other = c.Options("/v1/chat/completions", {{"Origin", "http://evil.test"}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
  // Actual requests: the header on answers and on refusals (so the page can read the error).
  httplib::Headers h = auth();
  h.emplace("Origin", "http://page.test");
  auto ok = c.Get("/v1/models", h);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->get_header_value("Access-Control-Allow-Origin"), "http://page.test");
  auto no_key = c.Get("/v1/models", {{"Origin", "http://page.test"}});
  ASSERT_TRUE(no_key);
  EXPECT_EQ(no_key->status, 401);
  EXPECT_EQ(no_key->get_header_value("Access-Control-Allow-Origin"), "http://page.test");
  // The transport's own refusals too (a body over --max-body, 32M by default).
  RawConnection raw(server_->port());
  raw.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nOrigin: http://page.test\r\nX-Request-Id: big-1\r\n"
           "Authorization: Bearer secret\r\nContent-Length: 40000000\r\n\r\n");
  const std::string reply = raw.read_all(3000);
  EXPECT_EQ(reply_statuses(reply), std::vector<int>{413}) << reply;
  EXPECT_NE(reply.find("Access-Control-Allow-Origin: http://page.test"), std::string::npos) << reply;
  EXPECT_NE(reply.find("x-request-id: big-1"), std::string::npos) << reply;
}

TEST(ServeCorsOff, NoCorsHeadersByDefault) {
  ServerProcess server({"-m", stories_path(), "-t", "1", "--kv-budget", "16M", "--api-key", "secret"});
  ASSERT_TRUE(server.running()) << server.log();
  httplib::Client c = server.client();
  auto p = c.Options("/v1/chat/completions", {{"Origin", "http://page.test"}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->status, 204);  // no key needed, but no permission either
  EXPECT_FALSE(p->has_header("Access-Control-Allow-Origin"));
}

TEST_F(ServeApi, OneLogLinePerRequest) {
  httplib::Client c = server_->client();
  auto r = c.Post("/v1/completions", {{"Authorization", "Bearer secret"}, {"X-Request-Id", "log-probe-1"}},
                  R"({"prompt":"Once upon","max_tokens":3,"temperature":0})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  c.Get("/health", {{"X-Request-Id", "log-probe-2"}});
  std::string line;
  for (int i = 0; i < 50 && line.empty(); ++i) {  // written as the request ends: give it a moment
    const std::string log = server_->log();
    const size_t at = log.find("id=log-probe-1 ");
    if (at != std::string::npos) line = log.substr(log.rfind('\n', at) + 1, log.find('\n', at) - log.rfind('\n', at) - 1);
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(line.empty()) << server_->log();
  for (const char* field : {"method=POST", "path=/v1/completions", "status=200", "prompt_tokens=", "gen_tokens=3",
                            "ttft_ms=", "tok_s=", "kv=f16", "kv_bytes="})
    EXPECT_NE(line.find(field), std::string::npos) << field << " in " << line;
  EXPECT_EQ(line.find("prompt_tokens=0 "), std::string::npos) << line;
  // The line is written as the request ends, which may be just after its reply arrives.
  auto log_once_written = [&](const std::string& needle) {
    for (int i = 0; i < 50 && server_->log().find(needle) == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return server_->log();
  };
  EXPECT_NE(log_once_written("id=log-probe-2 ").find("id=log-probe-2 method=GET path=/health status=200"),
            std::string::npos);
  // A refusal from the head (no key) is one line too, with its id.
  c.Get("/props", {{"X-Request-Id", "log-probe-3"}});
  const std::string log = log_once_written("id=log-probe-3 ");
  const size_t first = log.find("id=log-probe-3 method=GET path=/props status=401");
  EXPECT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find("path=/props status=401", log.find('\n', first)), std::string::npos) << log;
}

}  // namespace
}  // namespace vlkv
