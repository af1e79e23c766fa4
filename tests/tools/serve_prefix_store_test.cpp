// vlkv serve's prefix stores (docs/prefix_cache.md, "Beyond memory").
// --redis: two replicas sharing prefix-cache entries through a redis-server on loopback. A
// conversation about an image started on replica A continues on replica B with a hit
// (cached_tokens > 0) and the answer a server without any cache gives, byte for byte; an
// entry corrupted inside Redis is refused and recomputed (the answer still right); Redis
// hanging or gone is a logged miss, never a failed request. Skipped where redis-server is not installed
// (make deps installs it).
// Entries are signed under --cache-secret-file: one planted without the secret (a valid KV
// image, CRCs and all, but no MAC) is refused as forged, never loaded; replicas with another
// secret never see each other's entries; --redis without a secret does not start. A Redis
// that trickles its replies costs a request at most a lookup's deadline, and SIGTERM still
// ends the server at once.
// --cache-dir: an entry evicted from memory is written to a file and read back when a
// conversation comes back to its image, in the same process and in a new one on the same
// directory, with the answer a server without any cache gives; a file broken on disk, or
// one planted unsigned, is refused, deleted and recomputed.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <future>
#include <fstream>
#include <iterator>
#include <map>

#include "fake_redis_server.h"
#include "redis_process.h"
#include "serve_util.h"

namespace vlkv {
namespace {

using nlohmann::json;
using namespace testing_serve;
using testing_redis::kRedisServer;
using testing_redis::RedisProcess;
namespace fs = std::filesystem;

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

// A secret file for one deployment (created by the first server that names it).
std::string secret_path(const std::string& name) {
  const std::string path = ::testing::TempDir() + "vlkv_secret_" + name + "_" + std::to_string(getpid());
  std::remove(path.c_str());
  return path;
}

constexpr size_t kTrailer = 40;  // the envelope's "VLKVMAC1" and HMAC-SHA256 (tools/server/entry_envelope.h)

// What someone who can write to the store but lacks the secret can make (docs/kv_file.md):
// target's KV file image (its identity, method and rows: those looked up) with the KV section
// of donor's (another picture's cache), every CRC recomputed, and no MAC. Nothing when the
// two KV sections differ in size.
std::optional<std::string> with_kv_section_of(std::string target, const std::string& donor) {
  auto u32 = [](const std::string& b, size_t at) { uint32_t v; std::memcpy(&v, b.data() + at, 4); return v; };
  auto u64 = [](const std::string& b, size_t at) { uint64_t v; std::memcpy(&v, b.data() + at, 8); return v; };
  auto kv_entry = [&](const std::string& b) -> std::optional<size_t> {  // the KV section's row in the table
    if (b.size() < 32) return std::nullopt;
    for (uint32_t i = 0, n = u32(b, 12); i < n && 32 + 24 * (i + 1) <= b.size(); ++i)
      if (u32(b, 32 + 24 * i) == 5) return 32 + 24 * i;
    return std::nullopt;
  };
  const std::optional<size_t> t = kv_entry(target), d = kv_entry(donor);
  if (!t || !d || u64(target, *t + 16) != u64(donor, *d + 16)) return std::nullopt;
  const uint64_t size = u64(target, *t + 16);
  std::memcpy(target.data() + u64(target, *t + 8), donor.data() + u64(donor, *d + 8), size);
  const uint32_t section_crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(target.data() + u64(target, *t + 8)), static_cast<uInt>(size)));
  std::memcpy(target.data() + *t + 4, &section_crc, 4);
  uLong header_crc = crc32(0, reinterpret_cast<const Bytef*>(target.data()), 24);
  header_crc = crc32(header_crc, reinterpret_cast<const Bytef*>(target.data() + 32), 24 * u32(target, 12));
  const uint32_t h = static_cast<uint32_t>(header_crc);
  std::memcpy(target.data() + 24, &h, 4);
  return target;
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
  const std::string secret = secret_path("redis");
  ServerProcess plain(with({"--cache-budget", "0"}));
  ServerProcess a(with({"--cache-budget", "32M", "--redis", redis.address(), "--cache-secret-file", secret}));
  ServerProcess b(with({"--cache-budget", "32M", "--redis", redis.address(), "--cache-secret-file", secret}));
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

  // Every stored entry with one byte flipped in its middle (its MAC no longer holds): a third
  // replica, its local cache empty, refuses them and computes the answer itself.
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
  ServerProcess c(with({"--cache-budget", "32M", "--redis", redis.address(), "--cache-secret-file", secret}));
  ASSERT_TRUE(c.running()) << c.log();
  const Answer refused = ask(c, messages);
  EXPECT_EQ(refused.cached, 0);
  EXPECT_EQ(refused.text, second_plain.text);
  EXPECT_GE(metric(c, "vlkv:prefix_store_refused_total{store=\"redis\"}"), 1);
  EXPECT_GE(metric(c, "vlkv:prefix_store_forged_total{store=\"redis\"}"), 1);
  EXPECT_EQ(metric(c, "vlkv:media_encodes_total"), 1);
  EXPECT_NE(c.log().find("is not signed with this deployment's --cache-secret-file"), std::string::npos) << c.log();

  // Redis hanging (stopped), then gone: a fresh replica's lookups time out or fail (logged,
  // counted), and it answers right, in bounded time.
  for (bool gone : {false, true}) {
    SCOPED_TRACE(gone ? "redis killed" : "redis stopped");
    if (gone) redis.stop();
    else redis.pause();
    ServerProcess d(with({"--cache-budget", "32M", "--redis", redis.address(), "--cache-secret-file", secret}));
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
  std::remove(secret.c_str());
}

// Whoever can write to Redis but lacks the secret: entries replaced by unsigned KV images
// (a picture's entries carrying another picture's KV, every CRC valid) are refused as
// forged, never parsed, logged once, and the answer is the one computed without them. A replica under another secret
// finds none of the first deployment's entries. --redis without a secret does not start.
TEST(ServeRedis, UnsignedAndForeignEntriesAreMisses) {
  if (access(kRedisServer, X_OK) != 0) GTEST_SKIP() << "redis-server is not installed (apt-get install redis-server)";
  RedisProcess redis;
  ASSERT_TRUE(redis.ready()) << "redis-server did not answer PING on port " << redis.port();
  const std::vector<std::string> base = {"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "1",
                                         "--backend", "batch", "--kv-budget", "64M"};
  const std::vector<std::string> shared = {"--cache-budget", "32M", "--redis", redis.address()};
  auto with = [&](std::vector<std::string> extra, bool redis_too = true) {
    std::vector<std::string> args = base;
    if (redis_too) args.insert(args.end(), shared.begin(), shared.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  {
    ServerProcess no_secret(with({}));
    EXPECT_FALSE(no_secret.running());
    EXPECT_NE(no_secret.log().find("--redis needs --cache-secret-file"), std::string::npos) << no_secret.log();
  }
  const std::string ours = secret_path("ours"), theirs = secret_path("theirs");
  ServerProcess plain(with({"--cache-budget", "0"}, false));
  ServerProcess a(with({"--cache-secret-file", ours}));
  ASSERT_TRUE(a.running()) << a.log();
  json messages = json::array({user_turn("009.png", "Describe the image.")});
  const Answer first = ask(a, messages);
  ASSERT_TRUE(wait_for_writes(a, 1)) << a.log();
  messages.push_back({{"role", "assistant"}, {"content", first.text}});
  messages.push_back(user_turn(nullptr, "What color is it?"));
  const Answer expected = ask(plain, messages);

  // Another deployment on the same Redis: none of A's entries are found, none is forged.
  {
    ServerProcess other(with({"--cache-secret-file", theirs}));
    ASSERT_TRUE(other.running()) << other.log();
    const Answer answer = ask(other, messages);
    EXPECT_EQ(answer.cached, 0);
    EXPECT_EQ(answer.text, expected.text);
    EXPECT_EQ(metric(other, "vlkv:prefix_store_hits_total{store=\"redis\"}"), 0);
    EXPECT_EQ(metric(other, "vlkv:prefix_store_forged_total{store=\"redis\"}"), 0);
    EXPECT_EQ(other.stop(), 0);
  }

  // The first picture's entries get the KV of another picture's entries of the same size,
  // every CRC valid, no MAC (a replica without the check loads them and answers about the
  // other picture); any entry left without such a donor keeps its own KV, unsigned.
  auto value_of = [&](const std::string& key) {
    redisReply* v = redis.command({"GET", key});
    std::string out = v && v->type == REDIS_REPLY_STRING && v->len > kTrailer ? std::string(v->str, v->len - kTrailer) : "";
    if (v) freeReplyObject(v);
    return out;
  };
  const std::vector<std::string> keys = redis.keys();
  ASSERT_FALSE(keys.empty());
  const double written = metric(a, "vlkv:prefix_store_writes_total{store=\"redis\"}");
  ask(a, json::array({user_turn("005.png", "Describe the image.")}));
  ASSERT_TRUE(wait_for_writes(a, written + 1)) << a.log();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the turn's other entries
  std::vector<std::string> donors;
  for (const std::string& key : redis.keys())
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) donors.push_back(value_of(key));
  int swapped = 0;
  for (const std::string& key : keys) {
    std::string forged = value_of(key);
    ASSERT_FALSE(forged.empty());
    for (const std::string& donor : donors)
      if (std::optional<std::string> f = with_kv_section_of(forged, donor)) {
        forged = *f;
        ++swapped;
        break;
      }
    if (redisReply* set = redis.command({"SET", key, forged})) freeReplyObject(set);
  }
  EXPECT_GE(swapped, 1);
  ServerProcess c(with({"--cache-secret-file", ours}));
  ASSERT_TRUE(c.running()) << c.log();
  const Answer answer = ask(c, messages);
  EXPECT_EQ(answer.cached, 0);
  EXPECT_EQ(answer.text, expected.text);
  EXPECT_GE(metric(c, "vlkv:prefix_store_forged_total{store=\"redis\"}"), 1);
  EXPECT_EQ(metric(c, "vlkv:prefix_store_hits_total{store=\"redis\"}"), 0);
  const std::string log = c.log();
  const size_t first_warning = log.find("is not signed with this deployment's");
  EXPECT_NE(first_warning, std::string::npos) << log;
  EXPECT_EQ(log.find("is not signed with this deployment's", first_warning + 1), std::string::npos) << "logged once";
  EXPECT_EQ(log.find("prefix store: refused"), std::string::npos) << "never parsed: " << log;
  EXPECT_EQ(c.stop(), 0);
  EXPECT_EQ(a.stop(), 0);
  EXPECT_EQ(plain.stop(), 0);
  std::remove(ours.c_str());
  std::remove(theirs.c_str());
}

// A "Redis" that answers one byte every 100 ms: requests (three at once) take at most a
// lookup's deadline more than without any store, and SIGTERM ends the server at once.
TEST(ServeRedis, TricklingRedisHoldsUpNoRequestAndNoShutdown) {
  testing_redis::FakeRedis fake([](int fd, const std::atomic<bool>& stop) {
    while (!stop && testing_redis::FakeRedis::read_command(fd, stop)) {
      const std::string reply = ":" + std::string(100, '1') + "\r\n";
      for (size_t i = 0; i < reply.size() && !stop; ++i) {
        if (!testing_redis::FakeRedis::send_bytes(fd, reply.substr(i, 1), stop)) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  });
  const std::string secret = secret_path("trickle");
  const std::vector<std::string> common = {"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "3",
                                           "--backend", "batch", "--kv-budget", "64M"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  ServerProcess plain(with({"--cache-budget", "0"}));
  ServerProcess s(with({"--cache-budget", "32M", "--redis", "127.0.0.1:" + std::to_string(fake.port()),
                        "--cache-secret-file", secret}));
  ASSERT_TRUE(s.running()) << s.log();
  const char* images[] = {"005.png", "009.png", "026.png"};
  auto three_at_once = [&](const ServerProcess& server) {
    std::vector<std::future<double>> f;
    for (const char* image : images)
      f.push_back(std::async(std::launch::async, [&server, image] {
        const auto t0 = std::chrono::steady_clock::now();
        ask(server, json::array({user_turn(image, "Describe the image.")}));
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }));
    double slowest = 0;
    for (auto& x : f) slowest = std::max(slowest, x.get());
    return slowest;
  };
  const double without = three_at_once(plain), with_store = three_at_once(s);
  EXPECT_LT(with_store, without + 1.0) << s.log();
  EXPECT_GE(metric(s, "vlkv:prefix_store_errors_total{store=\"redis\"}"), 1);
  // SIGTERM while the writer is talking to the trickling Redis.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(s.stop(SIGTERM, 8000), 0) << s.log();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
  EXPECT_EQ(plain.stop(), 0);
  std::remove(secret.c_str());
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
  EXPECT_GE(metric(broken, "vlkv:prefix_store_forged_total{store=\"dir\"}"), 1);  // its MAC no longer holds
  EXPECT_EQ(metric(broken, "vlkv:media_encodes_total"), 1);
  EXPECT_NE(broken.log().find("is not signed with this deployment's"), std::string::npos) << broken.log();
  EXPECT_EQ(broken.stop(), 0);
  // The refused file was deleted (and maybe written again, whole, when its recomputed entry
  // was evicted): it no longer holds the corrupted bytes.
  int64_t replaced = 0;
  for (const auto& [path, bytes] : corrupted) replaced += contents(path) != bytes;
  EXPECT_GE(replaced, 1);

  // Files planted unsigned (the genuine KV images, trailer cut: every CRC valid), next to a
  // user's own files: refused as forged, never loaded, deleted; the user's files untouched.
  ASSERT_FALSE(entry_files(dir).empty());
  for (const fs::path& p : entry_files(dir)) {
    const std::string bytes = contents(p);
    ASSERT_GT(bytes.size(), kTrailer);
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - kTrailer);
  }
  const std::map<fs::path, std::string> planted = [&] {
    std::map<fs::path, std::string> m;
    for (const fs::path& p : entry_files(dir)) m[p] = contents(p);
    return m;
  }();
  for (const char* user : {"1.kv", "f16.kv", "notes.txt"}) std::ofstream(dir + "/" + user) << "mine";
  ServerProcess forged(with(spilling));
  ASSERT_TRUE(forged.running()) << forged.log();
  const Answer unsigned_answer = ask(forged, second);
  EXPECT_EQ(unsigned_answer.cached, 0);
  EXPECT_EQ(unsigned_answer.text, a2_plain.text);
  EXPECT_GE(metric(forged, "vlkv:prefix_store_forged_total{store=\"dir\"}"), 1);
  EXPECT_EQ(metric(forged, "vlkv:prefix_store_hits_total{store=\"dir\"}"), 0);
  EXPECT_EQ(forged.log().find("prefix store: refused"), std::string::npos) << "never parsed: " << forged.log();
  EXPECT_EQ(forged.stop(), 0);
  int64_t still_planted = 0;
  for (const auto& [path, bytes] : planted) still_planted += contents(path) == bytes;
  EXPECT_LT(still_planted, static_cast<int64_t>(planted.size()));
  for (const char* user : {"1.kv", "f16.kv", "notes.txt"}) EXPECT_EQ(contents(dir + "/" + user), "mine") << user;

  // A folder that holds files and was not made by vlkv serve: refused at start, untouched.
  const std::string foreign = dir + "_foreign";
  fs::remove_all(foreign);
  fs::create_directories(foreign);
  std::ofstream(foreign + "/1.kv") << "mine";
  {
    ServerProcess refused(with({"--cache-budget", "256K", "--cache-dir", foreign}));
    EXPECT_FALSE(refused.running());
    EXPECT_NE(refused.log().find("not made by vlkv serve"), std::string::npos) << refused.log();
  }
  EXPECT_EQ(contents(foreign + "/1.kv"), "mine");
  fs::remove_all(foreign);
  EXPECT_EQ(plain.stop(), 0);
  fs::remove_all(dir);
}

// Entry files replaced by FIFOs (someone with write access to the folder): a lookup that
// meets one misses at once instead of blocking in open() under the store's lock; the
// request is answered, /metrics too, and SIGTERM stops the server.
TEST(ServeCacheDir, FifoInPlaceOfAnEntryHoldsNothingUp) {
  const std::string dir = ::testing::TempDir() + "vlkv_cache_dir_fifo_" + std::to_string(getpid());
  fs::remove_all(dir);
  ServerProcess s({"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "1", "--backend", "batch",
                   "--kv-budget", "64M", "--cache-budget", "256K", "--cache-dir", dir});
  ASSERT_TRUE(s.running()) << s.log();
  json first = json::array({user_turn("005.png", "Describe the image.")});
  const Answer a1 = ask(s, first);
  ask(s, json::array({user_turn("009.png", "Describe the image.")}));  // evicts the first picture's entry to disk
  // Every evicted entry on disk: the count of writes at least 1 and unchanged for 0.5 s.
  double writes = -1;
  for (int i = 0, still = 0; i < 500 && still < 25; ++i) {
    const double now = metric(s, "vlkv:prefix_store_writes_total{store=\"dir\"}");
    still = now >= 1 && now == writes ? still + 1 : 0;
    writes = now;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(entry_files(dir).empty());
  for (const fs::path& p : entry_files(dir)) {
    fs::remove(p);
    ASSERT_EQ(mkfifo(p.c_str(), 0600), 0);
  }
  json second = first;
  second.push_back({{"role", "assistant"}, {"content", a1.text}});
  second.push_back(user_turn(nullptr, "Where is the shape?"));
  const auto t0 = std::chrono::steady_clock::now();
  httplib::Client c = s.client(10);
  const json body = {{"messages", second}, {"temperature", 0}, {"max_tokens", 16}};
  EXPECT_EQ(post(c, "/v1/chat/completions", body.dump()).status, 200);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_GE(metric(s, "vlkv:prefix_store_errors_total{store=\"dir\"}"), 1) << s.log();
  const auto t_stop = std::chrono::steady_clock::now();
  EXPECT_EQ(s.stop(SIGTERM, 8000), 0);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_stop).count(), 3.0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vlkv
