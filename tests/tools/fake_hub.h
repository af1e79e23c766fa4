// Starts tests/tools/fake_hub.py (a loopback stand-in for the Hugging Face hub) with Debian's
// python3 and points the -hf code at it: MODEL_ENDPOINT to the server, LLAMA_CACHE to a fresh
// folder. Requests the server saw are read back from its log.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace vlkv::testing_hub {

namespace fs = std::filesystem;

struct LoggedRequest {
  std::string method, path, range, authorization, user_agent;
};

class FakeHub {
 public:
  // config: fake_hub.py's (see there); the folder holds the config, port file, log and cache.
  FakeHub(const nlohmann::json& config, const fs::path& dir) : dir_(dir) {
    fs::create_directories(dir_);
    std::ofstream(dir_ / "hub.json") << config.dump();
    const std::string script = std::string(VLKV_SOURCE_DIR) + "/tests/tools/fake_hub.py";
    const std::string python = fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
    std::vector<std::string> args = {python, script, (dir_ / "hub.json").string(), (dir_ / "port").string(),
                                     (dir_ / "log.jsonl").string()};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
    for (int i = 0; i < 200 && pid_ > 0 && !fs::exists(dir_ / "port"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream(dir_ / "port") >> port_;
  }
  ~FakeHub() {
    stop();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  bool running() const { return port_ > 0; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }
  fs::path cache() const { return dir_ / "cache"; }

  std::vector<LoggedRequest> requests() const {
    std::vector<LoggedRequest> out;
    std::ifstream in(dir_ / "log.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      nlohmann::json j = nlohmann::json::parse(line);
      out.push_back({j["method"], j["path"], j["range"], j["authorization"], j["user_agent"]});
    }
    return out;
  }
  void clear_log() const { fs::remove(dir_ / "log.jsonl"); }

 private:
  fs::path dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// Sets an environment variable for one scope, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace vlkv::testing_hub
