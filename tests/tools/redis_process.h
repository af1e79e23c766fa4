// redis-server on a free loopback port for tests (skipped where it is not installed: make
// deps installs it), and one-command access to it through hiredis.
#pragma once

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "serve_util.h"

namespace vlkv::testing_redis {

constexpr const char* kRedisServer = "/usr/bin/redis-server";

// redis-server on a free loopback port, in the foreground, nothing persisted; killed at the end.
class RedisProcess {
 public:
  RedisProcess() {
    port_ = testing_serve::free_port();
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

}  // namespace vlkv::testing_redis
