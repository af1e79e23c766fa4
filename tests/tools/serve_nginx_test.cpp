// deploy/nginx.conf as shipped, in front of two vlkv serve replicas on 127.0.0.1: 32
// requests (some streaming) through nginx are all answered, and both replicas served
// some. Skipped where nginx is not installed (make deps installs nginx-light).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <regex>

#include "serve_util.h"

namespace vlkv {
namespace {

using nlohmann::json;
using namespace testing_serve;

constexpr const char* kNginx = "/usr/sbin/nginx";

TEST(ServeNginx, LeastConnToTwoReplicas) {
  if (access(kNginx, X_OK) != 0) GTEST_SKIP() << "nginx is not installed (apt-get install nginx-light)";
  ServerProcess a({"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "2", "--kv-budget", "64M"});
  ServerProcess b({"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "2", "--kv-budget", "64M"});
  ASSERT_TRUE(a.running()) << a.log();
  ASSERT_TRUE(b.running()) << b.log();
  const int port = free_port();
  ASSERT_GT(port, 0);

  // The shipped file with the test's ports; temp files and logs under a private prefix.
  const std::string dir = ::testing::TempDir() + "vlkv_nginx_" + std::to_string(getpid());
  std::filesystem::create_directories(dir + "/logs");
  std::string conf = read_file(std::string(VLKV_SOURCE_DIR) + "/deploy/nginx.conf");
  ASSERT_NE(conf.find("least_conn;"), std::string::npos);
  ASSERT_NE(conf.find("proxy_buffering off;"), std::string::npos);
  conf = std::regex_replace(conf, std::regex("127\\.0\\.0\\.1:8081"), "127.0.0.1:" + std::to_string(a.port()));
  conf = std::regex_replace(conf, std::regex("127\\.0\\.0\\.1:8082"), "127.0.0.1:" + std::to_string(b.port()));
  conf = std::regex_replace(conf, std::regex("listen 127\\.0\\.0\\.1:8080"), "listen 127.0.0.1:" + std::to_string(port));
  conf = std::regex_replace(conf, std::regex("worker_processes auto;"), "worker_processes 1;");
  conf = std::regex_replace(conf, std::regex("http \\{"),
                            "http {\n    access_log off;\n    client_body_temp_path tmp_body;\n    proxy_temp_path tmp_proxy;\n"
                            "    fastcgi_temp_path tmp_fastcgi;\n    uwsgi_temp_path tmp_uwsgi;\n    scgi_temp_path tmp_scgi;\n");
  {
    std::ofstream f(dir + "/nginx.conf");
    f << conf;
  }
  const std::string globals = "daemon off; master_process on; pid " + dir + "/nginx.pid; error_log " + dir + "/error.log;";
  const pid_t nginx = fork();
  if (nginx == 0) {
    std::string cf = dir + "/nginx.conf";
    execl(kNginx, kNginx, "-p", (dir + "/").c_str(), "-c", cf.c_str(), "-g", globals.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  bool up = false;
  for (int i = 0; i < 500 && !up; ++i) {
    auto r = c.Get("/health");
    up = r && r->status == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(up) << read_file(dir + "/error.log");

  const std::string image = image_data_uri(demo_image("005.png"));
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      httplib::Client cc("127.0.0.1", port);
      cc.set_read_timeout(60, 0);
      for (int i = 0; i < 4; ++i) {
        json body = {{"messages",
                      {{{"role", "user"},
                        {"content", {{{"type", "image_url"}, {"image_url", {{"url", image}}}},
                                     {{"type", "text"}, {"text", "Where is the blue circle?"}}}}}}},
                     {"temperature", 0},
                     {"max_tokens", 12}};
        if (i % 2 == 1) {
          body["stream"] = true;
          StreamReply s = post_stream(cc, "/v1/chat/completions", body.dump());
          if (s.status == 200 && s.complete && !stream_text(s).empty()) ++answered;
          continue;
        }
        HttpReply r = post(cc, "/v1/chat/completions", body.dump());
        if (r.status == 200 && !r.json["choices"][0]["message"]["content"].get<std::string>().empty()) ++answered;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(answered.load(), 32);
  httplib::Client ca = a.client(), cb = b.client();
  const double done_a = metric_value(get(ca, "/metrics").body, "vlkv:requests_done_total");
  const double done_b = metric_value(get(cb, "/metrics").body, "vlkv:requests_done_total");
  EXPECT_GT(done_a, 0);
  EXPECT_GT(done_b, 0);
  EXPECT_EQ(done_a + done_b, 32);

  kill(nginx, SIGTERM);
  int status = 0;
  for (int i = 0; i < 500 && waitpid(nginx, &status, WNOHANG) != nginx; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (kill(nginx, 0) == 0) {
    kill(nginx, SIGKILL);
    waitpid(nginx, &status, 0);
  }
  std::filesystem::remove_all(dir);
  EXPECT_EQ(a.stop(), 0);
  EXPECT_EQ(b.stop(), 0);
}

}  // namespace
}  // namespace vlkv
