// The chat page's server side: GET / and its files served without the key, byte for byte
// as in tools/web/ (the build embeds them), under a content security policy; /props' bits
// per element for every allowed method; llama-server's "timings" object in answers and in
// the final streamed chunk; /props' api_key_required. The page itself runs in a browser in
// tests/web/chat_page_test.py.
#include <gtest/gtest.h>

#include <filesystem>

#include "serve_util.h"

namespace vlkv {
namespace {

using nlohmann::json;
using namespace testing_serve;

class ServeWebPage : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess({"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "2", "--kv-budget",
                                 "64M", "--api-key", "secret", "--kv-allow", "kivi2,akvq_vl"});
  }
  static void TearDownTestSuite() { delete server_; }
  void SetUp() override { ASSERT_TRUE(server_->running()) << server_->log(); }
  static httplib::Client client() {
    httplib::Client c = server_->client();
    c.set_default_headers({{"Authorization", "Bearer secret"}});
    return c;
  }
  static json question(const std::string& kv, bool stream) {
    json content = json::array({{{"type", "image_url"}, {"image_url", {{"url", image_data_uri(demo_image("005.png"))}}}},
                                {{"type", "text"}, {"text", "Where is the blue circle?"}}});
    json q = {{"messages", json::array({{{"role", "user"}, {"content", content}}})},
              {"kv", kv},
              {"temperature", 0},
              {"max_tokens", 16},
              {"stream", stream}};
    if (stream) q["stream_options"] = {{"include_usage", true}};
    return q;
  }
  static ServerProcess* server_;
};
ServerProcess* ServeWebPage::server_ = nullptr;

TEST_F(ServeWebPage, FilesServedWithoutKeyAsInTheSourceTree) {
  httplib::Client c = server_->client();  // no key
  const std::filesystem::path dir = std::filesystem::path(VLKV_SOURCE_DIR) / "tools/web";
  int n_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    auto res = c.Get(("/" + name).c_str());
    ASSERT_TRUE(res) << name;
    EXPECT_EQ(res->status, 200) << name;
    EXPECT_EQ(res->body, read_file(entry.path().string())) << name << ": the binary's copy differs from tools/web/";
    const std::string csp = res->get_header_value("Content-Security-Policy");
    EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
    EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos) << csp;
    EXPECT_EQ(res->get_header_value("X-Content-Type-Options"), "nosniff");
    ++n_files;
  }
  EXPECT_GE(n_files, 3);
  auto root = c.Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 200);
  EXPECT_EQ(root->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(root->body, read_file((dir / "index.html").string()));
  EXPECT_EQ(c.Get("/chat.js")->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(c.Get("/chat.css")->get_header_value("Content-Type"), "text/css; charset=utf-8");
}

TEST_F(ServeWebPage, OnlyThePageIsOpen) {
  httplib::Client c = server_->client();  // no key
  EXPECT_EQ(get(c, "/props").status, 401);
  EXPECT_EQ(get(c, "/v1/models").status, 401);
  EXPECT_EQ(get(c, "/missing.js").status, 404);
  EXPECT_EQ(get(c, "/web/chat.js").status, 404);  // the files are flat: no folders
  HttpReply p = post(c, "/", "{}");
  EXPECT_EQ(p.status, 405) << p.body;
}

// The page shows its API-key box only where the server needs a key: /props says so (it is
// itself behind the key, so a 401 from it says so too, before the key is typed).
TEST_F(ServeWebPage, PropsSaysWhetherTheKeyIsRequired) {
  httplib::Client c = client();
  HttpReply with_key = get(c, "/props");
  ASSERT_EQ(with_key.status, 200) << with_key.body;
  EXPECT_EQ(with_key.json["api_key_required"], true) << with_key.body;

  ServerProcess open_server({"-m", model_path(), "-t", "1"});
  ASSERT_TRUE(open_server.running()) << open_server.log();
  httplib::Client oc = open_server.client();  // no key
  HttpReply without_key = get(oc, "/props");
  ASSERT_EQ(without_key.status, 200) << without_key.body;
  EXPECT_EQ(without_key.json["api_key_required"], false) << without_key.body;
}

TEST_F(ServeWebPage, PropsGivesBitsPerAllowedMethod) {
  httplib::Client c = client();
  HttpReply props = get(c, "/props");
  ASSERT_EQ(props.status, 200) << props.body;
  const json& bits = props.json["kv"]["bits_per_element"];
  ASSERT_EQ(bits.size(), 3u) << bits;
  EXPECT_EQ(bits["f16"].get<double>(), 16.0);
  for (const char* m : {"f16", "kivi2", "akvq_vl"}) {
    ASSERT_TRUE(bits.contains(m)) << bits;
    HttpReply r = post(c, "/v1/chat/completions", question(m, false).dump());
    ASSERT_EQ(r.status, 200) << r.body;
    // The same figure the answer reports (both come from the method object): exact.
    EXPECT_EQ(r.json["kv"]["bits_per_element"].get<double>(), bits[m].get<double>()) << m;
  }
  EXPECT_LT(bits["kivi2"].get<double>(), 16.0);
}

void expect_timings(const json& t, int64_t prompt_tokens, int64_t completion_tokens) {
  ASSERT_TRUE(t.is_object()) << t;
  EXPECT_EQ(t["prompt_n"].get<int64_t>(), prompt_tokens);
  EXPECT_EQ(t["predicted_n"].get<int64_t>(), completion_tokens);
  EXPECT_GT(t["prompt_ms"].get<double>(), 0);
  EXPECT_GT(t["predicted_ms"].get<double>(), 0);
  EXPECT_GE(t["queue_ms"].get<double>(), 0);
  // Rates are n / ms, computed from the same doubles: equal up to rounding (1e-9 relative).
  EXPECT_NEAR(t["predicted_per_second"].get<double>(), completion_tokens * 1e3 / t["predicted_ms"].get<double>(),
              1e-9 * t["predicted_per_second"].get<double>());
  EXPECT_NEAR(t["prompt_per_second"].get<double>(), prompt_tokens * 1e3 / t["prompt_ms"].get<double>(),
              1e-9 * t["prompt_per_second"].get<double>());
}

TEST_F(ServeWebPage, AnswersCarryTimings) {
  httplib::Client c = client();
  HttpReply r = post(c, "/v1/chat/completions", question("kivi2", false).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json& usage = r.json["usage"];
  EXPECT_GT(usage["completion_tokens"].get<int64_t>(), 0);
  expect_timings(r.json["timings"], usage["prompt_tokens"].get<int64_t>(), usage["completion_tokens"].get<int64_t>());

  StreamReply s = post_stream(c, "/v1/chat/completions", question("kivi2", true).dump());
  ASSERT_EQ(s.status, 200);
  ASSERT_TRUE(s.complete) << s.error;
  json final_chunk, usage_chunk;
  for (const std::string& e : s.events) {
    json j = json::parse(e);
    if (!j["choices"].empty() && !j["choices"][0]["finish_reason"].is_null()) final_chunk = j;
    if (j["usage"].is_object()) usage_chunk = j;
  }
  ASSERT_TRUE(final_chunk.is_object() && usage_chunk.is_object()) << s.events.size() << " events";
  EXPECT_EQ(final_chunk["kv"]["method"], "kivi2");
  expect_timings(final_chunk["timings"], usage_chunk["usage"]["prompt_tokens"].get<int64_t>(),
                 usage_chunk["usage"]["completion_tokens"].get<int64_t>());
  EXPECT_EQ(stream_text(s), r.json["choices"][0]["message"]["content"].get<std::string>());  // greedy: same answer
}

}  // namespace
}  // namespace vlkv
