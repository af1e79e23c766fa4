// vlkv serve's prefix stores (docs/prefix_cache.md, "Beyond memory").
// --redis: two replicas sharing prefix-cache entries through a redis-server on loopback. A
// conversation about an image started on replica A continues on replica B with a hit
// (cached_tokens > 0) and the answer a server without any cache gives, byte for byte; an
// entry corrupted inside Redis is refused and recomputed (the answer still right); Redis
// hanging or gone is a logged miss, never a failed request. Skipped where redis-server is not installed
// (make deps installs it).
// --cache-dir: an entry evicted from memory is written to a file and read back when a
// conversation comes back to its image, in the same process and in a new one on the same
// directory, with the answer a server without any cache gives; a file broken on disk is
// refused, deleted and recomputed.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "serve_util.h"

namespace vlkv {
namespace {

using nlohmann::json;
using namespace testing_serve;
namespace fs = std::filesystem;

constexpr const char* kRedisServer = "/usr/bin/redis-server";

// redis-server on a free loopback port, in the foreground, nothing persisted; killed at the end.
class RedisProcess {
 public:
  RedisProcess() {
    port_ = free_port();
    dir_ = ::testing::TempDir() + "vlkv_redis_" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    pid_ = fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      execl(kRedisServer, kRedisServer, "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", dir_.c_str(), "--logfile", (dir_ + "/redis.log").c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 250 && !ready(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ~RedisProcess() { stop(); }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  void pause() { kill(pid_, SIGSTOP); }  // accepts connections (the kernel does), answers nothing
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  bool ready() {
    redisReply* r = command({"PING"});
    const bool ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok;
  }
  // One command on a fresh connection (the caller frees the reply; null on failure).
  redisReply* command(const std::vector<std::string>& args) {
    timeval tv{1, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (!c || c->err) {
      if (c) redisFree(c);
      return nullptr;
    }
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    redisFree(c);
    return r;
  }
  std::vector<std::string> keys() {
    std::vector<std::string> out;
    if (redisReply* r = command({"KEYS", "vlkv:prefix:*"})) {
      for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; ++i) out.emplace_back(r->element[i]->str, r->element[i]->len);
      freeReplyObject(r);
    }
    return out;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string dir_;
};

json user_turn(const char* image, const std::string& text) {
  json content = json::array();
  if (image) content.push_back({{"type", "image_url"}, {"image_url", {{"url", image_data_uri(demo_image(image))}}}});
  content.push_back({{"type", "text"}, {"text", text}});
  return {{"role", "user"}, {"content", content}};
}

struct Answer {
  std::string text;
  int64_t cached = -1;
};

Answer ask(const ServerProcess& s, const json& messages) {
  httplib::Client c = s.client();
  json body = {{"messages", messages}, {"temperature", 0}, {"max_tokens", 16}};
  HttpReply r = post(c, "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return {};
  return {r.json["choices"][0]["message"]["content"], r.json["usage"]["prompt_tokens_details"]["cached_tokens"]};
}

double metric(const ServerProcess& s, const std::string& sample) {
  httplib::Client c = s.client();
  return metric_value(get(c, "/metrics").body, sample);
}

// Waits (bounded) until a replica's queued writes reached Redis.
bool wait_for_writes(const ServerProcess& s, double n) {
  for (int i = 0; i < 250; ++i) {
    if (metric(s, "vlkv:prefix_store_writes_total{store=\"redis\"}") >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(ServeRedis, ConversationContinuesOnAnotherReplicaWithAHit) {
  if (access(kRedisServer, X_OK) != 0) GTEST_SKIP() << "redis-server is not installed (apt-get install redis-server)";
  RedisProcess redis;
  ASSERT_TRUE(redis.ready()) << "redis-server did not answer PING on port " << redis.port();
  const std::vector<std::string> common = {"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "2",
                                           "--backend", "batch", "--kv-budget", "64M"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  ServerProcess plain(with({"--cache-budget", "0"}));
  ServerProcess a(with({"--cache-budget", "32M", "--redis", redis.address()}));
  ServerProcess b(with({"--cache-budget", "32M", "--redis", redis.address()}));
  ASSERT_TRUE(plain.running()) << plain.log();
  ASSERT_TRUE(a.running()) << a.log();
  ASSERT_TRUE(b.running()) << b.log();

  // Turn 1 on A (its entries go to Redis), turn 2 on B.
  json messages = json::array({user_turn("005.png", "Describe the image.")});
  const Answer first = ask(a, messages), first_plain = ask(plain, messages);
  EXPECT_EQ(first.text, first_plain.text);
  EXPECT_EQ(first.cached, 0);
  ASSERT_TRUE(wait_for_writes(a, 1)) << a.log();
  ASSERT_FALSE(redis.keys().empty());
  messages.push_back({{"role", "assistant"}, {"content", first_plain.text}});
  messages.push_back(user_turn(nullptr, "Where is the shape?"));
  const Answer second = ask(b, messages), second_plain = ask(plain, messages);
  EXPECT_GT(second.cached, 0) << b.log();
  EXPECT_EQ(second.text, second_plain.text);
  EXPECT_GE(metric(b, "vlkv:prefix_store_hits_total{store=\"redis\"}"), 1);
  EXPECT_EQ(metric(b, "vlkv:prefix_store_refused_total{store=\"redis\"}"), 0);
  // B never saw the image before: the entry covers it, so B's vision encoder never ran.
  EXPECT_EQ(metric(b, "vlkv:media_encodes_total"), 0) << b.log();
  EXPECT_EQ(metric(a, "vlkv:media_encodes_total"), 1);

  // Every stored entry with one byte flipped in its middle (a section's checksum catches it):
  // a third replica, its local cache empty, refuses them and computes the answer itself.
  for (const std::string& key : redis.keys()) {
    redisReply* len = redis.command({"STRLEN", key});
    ASSERT_TRUE(len && len->type == REDIS_REPLY_INTEGER);
    const long long middle = len->integer / 2;
    freeReplyObject(len);
    redisReply* byte = redis.command({"GETRANGE", key, std::to_string(middle), std::to_string(middle)});
    ASSERT_TRUE(byte && byte->type == REDIS_REPLY_STRING && byte->len == 1);
    const std::string flipped(1, static_cast<char>(byte->str[0] ^ 0x5a));
    freeReplyObject(byte);
    if (redisReply* set = redis.command({"SETRANGE", key, std::to_string(middle), flipped})) freeReplyObject(set);
  }
  ServerProcess c(with({"--cache-budget", "32M", "--redis", redis.address()}));
  ASSERT_TRUE(c.running()) << c.log();
  const Answer refused = ask(c, messages);
  EXPECT_EQ(refused.cached, 0);
  EXPECT_EQ(refused.text, second_plain.text);
  EXPECT_GE(metric(c, "vlkv:prefix_store_refused_total{store=\"redis\"}"), 1);
  EXPECT_EQ(metric(c, "vlkv:media_encodes_total"), 1);  // refused at admission: encoded then
  EXPECT_NE(c.log().find("prefix store: refused vlkv:prefix:"), std::string::npos) << c.log();

  // Redis hanging (stopped), then gone: a fresh replica's lookups time out or fail (logged,
  // counted), and it answers right, in bounded time.
  for (bool gone : {false, true}) {
    SCOPED_TRACE(gone ? "redis killed" : "redis stopped");
    if (gone) redis.stop();
    else redis.pause();
    ServerProcess d(with({"--cache-budget", "32M", "--redis", redis.address()}));
    ASSERT_TRUE(d.running()) << d.log();
    const auto t0 = std::chrono::steady_clock::now();
    const Answer down = ask(d, messages);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(down.text, second_plain.text);
    EXPECT_EQ(down.cached, 0);
    EXPECT_LT(seconds, 10.0);
    EXPECT_GE(metric(d, "vlkv:prefix_store_errors_total{store=\"redis\"}"), 1);
    EXPECT_EQ(metric(d, "vlkv:media_encodes_total"), 1);
    EXPECT_NE(d.log().find("prefix entries are computed here until it answers"), std::string::npos) << d.log();
    EXPECT_EQ(d.stop(), 0);
  }
  EXPECT_EQ(a.stop(), 0);
  EXPECT_EQ(b.stop(), 0);
  EXPECT_EQ(c.stop(), 0);
  EXPECT_EQ(plain.stop(), 0);
}

std::vector<fs::path> entry_files(const std::string& dir) {
  std::vector<fs::path> out;
  for (const fs::directory_entry& d : fs::directory_iterator(dir))
    if (d.path().extension() == ".kv") out.push_back(d.path());
  return out;
}

TEST(ServeCacheDir, EvictedEntriesComeBackFromDisk) {
  const std::string dir = ::testing::TempDir() + "vlkv_cache_dir_" + std::to_string(getpid());
  fs::remove_all(dir);
  const std::vector<std::string> common = {"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "1",
                                           "--backend", "batch", "--kv-budget", "64M"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  // Room for one image's entry at a time (tinyvlm: ~156 KiB of f16 pages each): the second
  // picture's evict the first's.
  const std::vector<std::string> spilling = {"--cache-budget", "256K", "--cache-dir", dir};
  ServerProcess plain(with({"--cache-budget", "0"})), s(with(spilling));
  ASSERT_TRUE(plain.running()) << plain.log();
  ASSERT_TRUE(s.running()) << s.log();

  json first = json::array({user_turn("005.png", "Describe the image.")});
  const Answer a1 = ask(s, first), a1_plain = ask(plain, first);
  EXPECT_EQ(a1.text, a1_plain.text);
  json other = json::array({user_turn("009.png", "Describe the image.")});
  EXPECT_EQ(ask(s, other).text, ask(plain, other).text);
  EXPECT_GE(metric(s, "vlkv:prefix_cache_evictions_total{method=\"f16\"}"), 1);
  EXPECT_GE(metric(s, "vlkv:prefix_store_writes_total{store=\"dir\"}"), 1);
  ASSERT_FALSE(entry_files(dir).empty());

  // Back to the first picture: its entry comes from the file.
  json second = first;
  second.push_back({{"role", "assistant"}, {"content", a1_plain.text}});
  second.push_back(user_turn(nullptr, "Where is the shape?"));
  const Answer a2_plain = ask(plain, second), a2 = ask(s, second);
  EXPECT_GT(a2.cached, 0) << s.log();
  EXPECT_EQ(a2.text, a2_plain.text);
  EXPECT_GE(metric(s, "vlkv:prefix_store_hits_total{store=\"dir\"}"), 1);
  EXPECT_EQ(s.stop(), 0);

  // A new process on the same directory starts warm.
  {
    ServerProcess again(with(spilling));
    ASSERT_TRUE(again.running()) << again.log();
    const Answer warm = ask(again, other);
    EXPECT_GT(warm.cached, 0) << again.log();
    EXPECT_EQ(warm.text, ask(plain, other).text);
    EXPECT_EQ(metric(again, "vlkv:media_encodes_total"), 0);  // the file covers the picture: not encoded
    EXPECT_EQ(again.stop(), 0);
  }

  // Every file with one byte flipped in its middle: refused (logged), deleted, recomputed.
  for (const fs::path& p : entry_files(dir)) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const std::streamoff middle = f.tellg() / 2;
    char c = 0;
    f.seekg(middle);
    f.get(c);
    f.seekp(middle);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  auto contents = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return f ? std::string(std::istreambuf_iterator<char>(f), {}) : std::string();
  };
  std::map<fs::path, std::string> corrupted;
  for (const fs::path& p : entry_files(dir)) corrupted[p] = contents(p);
  ServerProcess broken(with(spilling));
  ASSERT_TRUE(broken.running()) << broken.log();
  const Answer recomputed = ask(broken, second);
  EXPECT_EQ(recomputed.cached, 0);
  EXPECT_EQ(recomputed.text, a2_plain.text);
  EXPECT_GE(metric(broken, "vlkv:prefix_store_refused_total{store=\"dir\"}"), 1);
  EXPECT_EQ(metric(broken, "vlkv:media_encodes_total"), 1);
  EXPECT_NE(broken.log().find("prefix store: refused vlkv:prefix:"), std::string::npos) << broken.log();
  EXPECT_EQ(broken.stop(), 0);
  // The refused file was deleted (and maybe written again, whole, when its recomputed entry
  // was evicted): it no longer holds the corrupted bytes.
  int64_t replaced = 0;
  for (const auto& [path, bytes] : corrupted) replaced += contents(path) != bytes;
  EXPECT_GE(replaced, 1);
  EXPECT_EQ(plain.stop(), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vlkv
