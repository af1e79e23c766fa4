// Every error vlkv serve promises comes back with its HTTP status and llama-server's JSON
// shape {"error":{"code","message","type"}}, and the server answers correctly afterwards.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "cli_util.h"
#include "serve_util.h"

namespace vlkv {
namespace {

using nlohmann::json;
using namespace testing_serve;

void expect_error(const HttpReply& r, int code, const char* type) {
  EXPECT_EQ(r.status, code) << r.body;
  ASSERT_TRUE(r.json.is_object()) << r.body;
  ASSERT_TRUE(r.json.contains("error")) << r.body;
  const json& e = r.json["error"];
  EXPECT_EQ(e["code"], code) << r.body;
  EXPECT_EQ(e["type"], type) << r.body;
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r.body;
}

json ask(const json& content, int max_tokens = 8) {
  return {{"messages", {{{"role", "user"}, {"content", content}}}}, {"temperature", 0}, {"max_tokens", max_tokens}};
}

json image_part(const std::string& url) { return {{"type", "image_url"}, {"image_url", {{"url", url}}}}; }

class ServeErrors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    media_dir_ = ::testing::TempDir() + "vlkv_serve_media_" + std::to_string(getpid());
    std::filesystem::create_directories(media_dir_);
    std::filesystem::copy_file(demo_image("005.png"), media_dir_ + "/005.png",
                               std::filesystem::copy_options::overwrite_existing);
    server_ = new ServerProcess({"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "1", "--kv-budget",
                                 "64M", "--api-key", "sekret", "--max-body", "2M", "--max-images", "2",
                                 "--max-image-pixels", "20000", "-c", "400", "--media-path", media_dir_, "--kv-allow",
                                 "kivi2"});
  }
  static void TearDownTestSuite() {
    delete server_;
    std::filesystem::remove_all(media_dir_);
  }
  void SetUp() override { ASSERT_TRUE(server_->running()) << server_->log(); }
  void TearDown() override { expect_still_answers(); }

  static HttpReply chat(const json& body) {
    httplib::Client c = server_->client();
    return post(c, "/v1/chat/completions", body.dump(), auth());
  }
  static HttpReply chat_raw(const std::string& body) {
    httplib::Client c = server_->client();
    return post(c, "/v1/chat/completions", body, auth());
  }
  static httplib::Headers auth() { return {{"Authorization", "Bearer sekret"}}; }
  // After each error: a good request still gets a good answer.
  static void expect_still_answers() {
    HttpReply r = chat(ask("How many shapes are there?", 4));
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json["usage"]["completion_tokens"].get<int>() > 0, true) << r.body;
  }

  static ServerProcess* server_;
  static std::string media_dir_;
};
ServerProcess* ServeErrors::server_ = nullptr;
std::string ServeErrors::media_dir_;

TEST_F(ServeErrors, MalformedJsonAndFields) {
  expect_error(chat_raw("{\"messages\": [ {\"role\": \"user\", "), 400, "invalid_request_error");
  expect_error(chat_raw("[1, 2, 3]"), 400, "invalid_request_error");
  expect_error(chat_raw("{}"), 400, "invalid_request_error");  // no messages
  expect_error(chat(json{{"messages", json::array()}}), 400, "invalid_request_error");
  expect_error(chat(json{{"messages", "hello"}}), 400, "invalid_request_error");
  expect_error(chat(json{{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}), 400, "invalid_request_error");
  expect_error(chat(json{{"messages", {{{"role", "user"}, {"content", 42}}}}}), 400, "invalid_request_error");
  expect_error(chat(json{{"messages", {{{"role", "user"}, {"content", {{{"type", "audio"}}}}}}}}), 400,
               "invalid_request_error");
  json bad_types = ask("hi");
  bad_types["max_tokens"] = "many";
  expect_error(chat(bad_types), 400, "invalid_request_error");
  bad_types = ask("hi");
  bad_types["temperature"] = "hot";
  expect_error(chat(bad_types), 400, "invalid_request_error");
  bad_types = ask("hi");
  bad_types["top_p"] = 0;  // outside (0, 1]: SamplerParams' table, as vlkv run --top-p 0
  expect_error(chat(bad_types), 400, "invalid_request_error");
  bad_types = ask("hi");
  bad_types["stream"] = "yes";
  expect_error(chat(bad_types), 400, "invalid_request_error");
  bad_types = ask("hi");
  bad_types["n"] = 3;
  expect_error(chat(bad_types), 400, "invalid_request_error");
  httplib::Client c = server_->client();
  expect_error(post(c, "/v1/completions", json{{"prompt", 7}}.dump(), auth()), 400, "invalid_request_error");
}

TEST_F(ServeErrors, BadImages) {
  const std::string text = "Where is the blue circle?";
  expect_error(chat(ask({image_part("data:image/png;base64,@@@not-base64@@@"), {{"type", "text"}, {"text", text}}})),
               400, "invalid_request_error");
  // Valid base64 of bytes that are no image.
  expect_error(chat(ask({image_part("data:image/png;base64,aGVsbG8gd29ybGQ="), {{"type", "text"}, {"text", text}}})),
               400, "invalid_request_error");
  expect_error(chat(ask({image_part("data:image/png,rawbytes")})), 400, "invalid_request_error");
  expect_error(chat(ask({image_part("https://example.com/cat.png")})), 400, "invalid_request_error");
  expect_error(chat(ask({{{"type", "image_url"}}})), 400, "invalid_request_error");
  // 96x96 = 9216 pixels pass --max-image-pixels 20000; a 3x-wider picture would not, and
  // three images exceed --max-images 2.
  const std::string uri = image_data_uri(demo_image("005.png"));
  expect_error(chat(ask({image_part(uri), image_part(uri), image_part(uri)})), 400, "invalid_request_error");
  HttpReply two = chat(ask({image_part(uri), image_part(uri), {{"type", "text"}, {"text", text}}}));
  EXPECT_EQ(two.status, 200) << two.body;
}

TEST_F(ServeErrors, OverLimitImagePixels) {
  // A 200x200 PNG: 40000 pixels > --max-image-pixels 20000.
  const std::string png_path = media_dir_ + "/big.png";
  ASSERT_EQ(std::system(("ffmpeg -loglevel error -y -f lavfi -i color=c=gray:s=200x200 -frames:v 1 " + png_path).c_str()), 0);
  expect_error(chat(ask({image_part(image_data_uri(png_path))})), 400, "invalid_request_error");
  expect_error(chat(ask({image_part("file://" + png_path)})), 400, "invalid_request_error");
}

TEST_F(ServeErrors, FileUrlsOnlyUnderMediaPath) {
  HttpReply ok = chat(ask({image_part("file://" + media_dir_ + "/005.png"), {{"type", "text"}, {"text", "Where is the blue circle?"}}}));
  EXPECT_EQ(ok.status, 200) << ok.body;
  expect_error(chat(ask({image_part("file://" + demo_image("009.png"))})), 400, "invalid_request_error");
  expect_error(chat(ask({image_part("file://" + media_dir_ + "/../../etc/passwd")})), 400, "invalid_request_error");
  expect_error(chat(ask({image_part("file://" + media_dir_ + "/missing.png")})), 400, "invalid_request_error");
}

TEST_F(ServeErrors, KvMethodNotAllowed) {
  json body = ask("How many shapes are there?");
  body["kv"] = "int4";
  expect_error(chat(body), 400, "invalid_request_error");
  body["kv"] = 5;
  expect_error(chat(body), 400, "invalid_request_error");
  body["kv"] = "kivi2";
  EXPECT_EQ(chat(body).status, 200);
}

TEST_F(ServeErrors, PromptThatCanNeverFitTheContext) {
  std::string long_text;
  for (int i = 0; i < 500; ++i) long_text += "circle ";  // > 400 tokens (-c 400)
  expect_error(chat(ask(long_text)), 400, "invalid_request_error");
  json stream = ask(long_text);
  stream["stream"] = true;
  expect_error(chat(stream), 400, "invalid_request_error");  // before any event: a plain error reply
}

TEST_F(ServeErrors, Authentication) {
  httplib::Client c = server_->client();
  const std::string body = ask("hi").dump();
  expect_error(post(c, "/v1/chat/completions", body), 401, "authentication_error");
  expect_error(post(c, "/v1/chat/completions", body, {{"Authorization", "Bearer wrong"}}), 401, "authentication_error");
  expect_error(post(c, "/v1/chat/completions", body, {{"Authorization", "sekret"}}), 401, "authentication_error");
  expect_error(get(c, "/v1/models"), 401, "authentication_error");
  EXPECT_EQ(get(c, "/v1/models", auth()).status, 200);
  EXPECT_EQ(get(c, "/health").status, 200);  // never needs the key
}

TEST_F(ServeErrors, NotFoundAndBodyTooLarge) {
  httplib::Client c = server_->client();
  expect_error(get(c, "/v2/nothing", auth()), 404, "not_found_error");
  expect_error(post(c, "/v1/embeddings", "{}", auth()), 404, "not_found_error");
  std::string big(3u << 20, 'x');  // 3 MiB > --max-body 2M
  expect_error(post(c, "/v1/chat/completions", "{\"pad\":\"" + big + "\"}", auth()), 413, "invalid_request_error");
}

class ServeQueue : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Backends, ServeQueue, ::testing::Values("batch", "sessions"));

TEST_P(ServeQueue, FullQueueIs503AndTimeoutsAre503) {
  // One slot, no queue, 30 ms per token: a second request while one runs gets 503. The first
  // request (20 tokens, 0.6 s) keeps 1.4 s of slack under --timeout 2 for a loaded machine.
  ServerProcess server({"-m", stories_path(), "-t", "1", "-np", "1", "--max-queue", "0", "--token-delay-ms", "30",
                        "--kv-budget", "64M", "--timeout", "2", "--backend", GetParam()});
  ASSERT_TRUE(server.running()) << server.log();
  json slow = {{"prompt", "Once upon a time"}, {"max_tokens", 20}, {"temperature", 0}};
  std::thread first([&] {
    httplib::Client c = server.client();
    HttpReply r = post(c, "/v1/completions", slow.dump());
    EXPECT_EQ(r.status, 200) << r.body;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  httplib::Client c = server.client();
  expect_error(post(c, "/v1/completions", slow.dump()), 503, "unavailable_error");
  first.join();
  // 100 tokens at 30 ms exceed --timeout 2: 503 with a message saying so.
  json long_one = {{"prompt", "Once upon a time"}, {"max_tokens", 100}, {"temperature", 0}};
  HttpReply t = post(c, "/v1/completions", long_one.dump());
  expect_error(t, 503, "unavailable_error");
  EXPECT_NE(t.body.find("timed out"), std::string::npos) << t.body;
  HttpReply ok = post(c, "/v1/completions", json({{"prompt", "Once"}, {"max_tokens", 3}}).dump());
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace vlkv

namespace vlkv {
namespace {

// Bad flags or files end the server at once with status 2 (bounded: a hang fails by timeout).
TEST(ServeStartup, BadModelOrFlagsExitWithStatus2) {
  using testing_serve::stories_path;
  const std::vector<std::vector<std::string>> cases = {
      {"-m", "/nonexistent.gguf"},
      {"-m", stories_path(), "--kv", "nosuch"},
      {"-m", stories_path(), "--kv-allow", "kivi2,nosuch"},
      {"-m", stories_path(), "--backend", "nope"},
      {"-m", stories_path(), "--kv-budget", "1K"},
      {"-m", stories_path(), "--max-body", "lots"},
      {"--port", "0"},
  };
  for (const std::vector<std::string>& args : cases) {
    // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.
    std::string cmd = "timeout -k 2 30 ";
    cmd += testing_cli::shell_quote(VLKV_CLI_PATH);
    cmd += " serve --host 127.0.0.1 --port 0";
    for (const std::string& a : args) {
      cmd += ' ';
      cmd += testing_cli::shell_quote(a);
    }
    cmd += " >/dev/null 2>&1";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status)) << cmd;
    EXPECT_EQ(WEXITSTATUS(status), 2) << cmd;
  }
}

}  // namespace
}  // namespace vlkv
