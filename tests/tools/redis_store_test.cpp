// RedisStore (vlkv serve --redis) against what a Redis it cannot trust may do: a reply
// trickled a byte at a time costs each lookup at most its deadline (not a timeout per read),
// and Redis is then left alone; a value over the entry cap is refused from STRLEN or from its
// reply's header, before its bytes are read; a reply of a kind no command of ours gets is
// refused. With a real redis-server (skipped where none is installed): values round-trip.
#include "server/redis_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "fake_redis_server.h"
#include "redis_process.h"

namespace vlkv::server {
namespace {

using testing_redis::FakeRedis;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

RedisOptions options_for(int port) {
  RedisOptions o;
  o.port = port;
  o.timeout = std::chrono::milliseconds(200);
  o.retry_after = std::chrono::milliseconds(2000);
  o.max_entry_bytes = 1 << 20;
  return o;
}

const std::string kKey = "vlkv:prefix:" + std::string(32, 'a');

// Answers every command with an integer reply one byte per 100 ms, for 10 s.
void trickle(int fd, const std::atomic<bool>& stop) {
  if (!FakeRedis::read_command(fd, stop)) return;
  const std::string reply = ":" + std::string(100, '1') + "\r\n";
  for (size_t i = 0; i < reply.size() && !stop; ++i) {
    if (!FakeRedis::send_bytes(fd, reply.substr(i, 1), stop)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

TEST(RedisStore, TrickledReplyCostsEachLookupAtMostItsDeadline) {
  FakeRedis fake(trickle);
  const auto t_store = Clock::now();
  {
    RedisStore store(options_for(fake.port()));
    // Three requests at once: one on the connection until its deadline, the others waiting
    // for it at most the timeout; then Redis rests and they miss at once.
    std::vector<std::future<double>> lookups;
    for (int i = 0; i < 3; ++i)
      lookups.push_back(std::async(std::launch::async, [&store] {
        const auto t0 = Clock::now();
        EXPECT_FALSE(store.get(kKey).has_value());
        return seconds_since(t0);
      }));
    for (auto& f : lookups) EXPECT_LT(f.get(), 1.0);
    const auto t0 = Clock::now();
    EXPECT_FALSE(store.get(kKey).has_value());  // resting: not asked
    EXPECT_LT(seconds_since(t0), 0.05);
    const PrefixStoreStats st = store.stats();
    EXPECT_EQ(st.misses, 4);
    EXPECT_GE(st.errors, 1);
    EXPECT_EQ(fake.connections(), 1);
    // A write stuck on the same Redis does not hold up the store's end.
    store.put(kKey, std::string(1000, 'v'));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_LT(seconds_since(t_store), 3.0);
}

TEST(RedisStore, ValueOverTheCapIsRefusedFromItsHeaderNotRead) {
  // STRLEN says 10 bytes; GETRANGE's reply then declares 200 MB and the server tries to send them.
  std::atomic<uint64_t> sent{0};
  std::atomic<bool> done{false};
  FakeRedis fake([&](int fd, const std::atomic<bool>& stop) {
    if (FakeRedis::read_command(fd, stop) && FakeRedis::send_bytes(fd, ":10\r\n", stop) && FakeRedis::read_command(fd, stop) &&
        FakeRedis::send_bytes(fd, "$200000000\r\n", stop)) {
      const std::string chunk(1 << 20, 'x');
      uint64_t n = 0;
      for (int i = 0; i < 200 && FakeRedis::send_bytes(fd, chunk, stop, &n); ++i) {
      }
      sent = n;
    }
    done = true;
  });
  RedisStore store(options_for(fake.port()));
  const auto t0 = Clock::now();
  EXPECT_FALSE(store.get(kKey).has_value());
  EXPECT_LT(seconds_since(t0), 1.0);
  for (int i = 0; i < 500 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(done);
  EXPECT_LT(sent.load(), 32u << 20) << "the client read the oversized value";
  EXPECT_EQ(store.stats().bytes_read, 0u);
  EXPECT_GE(store.stats().errors, 1);
}

TEST(RedisStore, ReplyOfAnotherKindIsRefused) {
  FakeRedis fake([](int fd, const std::atomic<bool>& stop) {
    if (FakeRedis::read_command(fd, stop)) FakeRedis::send_bytes(fd, "*2000000000\r\n", stop);
    while (!stop && FakeRedis::read_command(fd, stop)) {
    }
  });
  RedisStore store(options_for(fake.port()));
  const auto t0 = Clock::now();
  EXPECT_FALSE(store.get(kKey).has_value());
  EXPECT_LT(seconds_since(t0), 0.5);
  EXPECT_GE(store.stats().errors, 1);
}

TEST(RedisStore, RoundTripsAndRefusesOversizedValuesWithRedis) {
  if (access(testing_redis::kRedisServer, X_OK) != 0) GTEST_SKIP() << "redis-server is not installed";
  testing_redis::RedisProcess redis;
  ASSERT_TRUE(redis.ready());
  RedisStore store(options_for(redis.port()));
  const std::string value(300000, 'k');
  ASSERT_TRUE(store.wants(kKey, value.size()));
  store.put(kKey, value);
  std::optional<std::string> got;
  for (int i = 0; i < 200 && !(got = store.get(kKey)); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, value);
  // Another writer put 2 MB under a key: over the 1 MB cap, refused from STRLEN, not read.
  const std::string big_key = "vlkv:prefix:" + std::string(32, 'b');
  if (redisReply* r = redis.command({"SET", big_key, std::string(2 << 20, 'x')})) freeReplyObject(r);
  const uint64_t read_before = store.stats().bytes_read;
  EXPECT_FALSE(store.get(big_key).has_value());
  EXPECT_EQ(store.stats().bytes_read, read_before);
  EXPECT_EQ(store.stats().refused, 1);
}

}  // namespace
}  // namespace vlkv::server
