// The parameter tables (EngineParams and SamplerParams::visit) drive every command's flags,
// the JSON of GET /props and vlkv bench, and one error message per bad value: each command
// has the flags it should (the expected lists below are written out, not read from the
// tables), JSON names round-trip, and the CLI, the server and Engine::load refuse a value
// outside a row's range with the same words.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "commands.h"
#include "param_json.h"
#include "server/openai_request.h"
#include "vlkv/engine.h"

namespace vlkv {
namespace {

struct Cli {
  CLI::App root{"vlkv"};
  std::vector<cli::Command> commands;
  Cli() {
    cli::add_run_command(root, commands);
    cli::add_chat_command(root, commands);
    cli::add_bench_command(root, commands);
    cli::add_eval_command(root, commands);
    cli::add_calibrate_command(root, commands);
    cli::add_serve_command(root, commands);
  }
};

// The longest name of a row's flags ("-t,--threads" -> "--threads").
std::string long_flag(const char* flags) {
  std::string s(flags);
  return s.substr(s.rfind(',') + 1);
}

template <typename Params>
std::map<std::string, ParamField> rows() {
  std::map<std::string, ParamField> out;
  Params p;
  Params::visit(p, [&](const auto&, const ParamField& info) { out[info.json] = info; });
  return out;
}

TEST(ParamTable, EveryCommandHasTheFlagsOfItsRows) {
  // Which EngineParams rows each command takes (kv and kv_budget_bytes through tools/kv_flags.h
  // or the command's own method list; their help is the command's).
  const std::map<std::string, std::vector<std::string>> takes = {
      {"run", {"model", "mmproj", "max_frames", "max_image_pixels", "image_min_tokens", "image_max_tokens", "kv", "kv_budget_bytes", "n_threads", "n_ctx",
               "n_batch", "exact_matmul"}},
      {"chat", {"model", "mmproj", "max_frames", "max_image_pixels", "image_min_tokens", "image_max_tokens", "kv", "kv_budget_bytes", "n_threads", "n_ctx",
                "n_batch", "exact_matmul"}},
      {"serve", {"model", "mmproj", "max_image_pixels", "image_min_tokens", "image_max_tokens", "kv", "kv_budget_bytes", "n_threads", "n_ctx", "n_batch",
                 "exact_matmul"}},
      {"bench", {"model", "image_min_tokens", "image_max_tokens", "kv", "kv_budget_bytes", "n_threads", "n_batch", "exact_matmul"}},
      {"eval", {"model", "mmproj", "kv", "kv_budget_bytes", "n_threads", "exact_matmul"}},
      {"calibrate", {"model", "mmproj", "n_threads"}},
  };
  Cli cli;
  const auto engine_rows = rows<EngineParams>();
  std::set<std::string> taken;
  for (const auto& [command, names] : takes) {
    CLI::App* app = cli.root.get_subcommand(command);
    for (const std::string& name : names) {
      ASSERT_TRUE(engine_rows.count(name)) << name;
      const ParamField& info = engine_rows.at(name);
      const CLI::Option* opt = app->get_option_no_throw(long_flag(info.flags));
      ASSERT_NE(opt, nullptr) << command << " lacks " << info.flags;
      if (name != "kv" && name != "kv_budget_bytes") {
        EXPECT_EQ(opt->get_description(), info.help) << command << " " << name;
      }
      taken.insert(name);
    }
  }
  // A row with a flag that no command takes is a flag nobody can set.
  for (const auto& [name, info] : engine_rows) {
    if (*info.flags) {
      EXPECT_TRUE(taken.count(name)) << name << " (" << info.flags << ") is in no command";
    }
  }
  // vlkv run takes every sampling row, with the table's help.
  for (const auto& [name, info] : rows<SamplerParams>()) {
    const CLI::Option* opt = cli.root.get_subcommand("run")->get_option_no_throw(long_flag(info.flags));
    ASSERT_NE(opt, nullptr) << info.flags;
    EXPECT_EQ(opt->get_description(), info.help);
  }
}

TEST(ParamTable, JsonNamesRoundTrip) {
  EngineParams e;
  e.model_path = "m.gguf";
  e.mmproj_path = "p.gguf";
  e.media_limits.max_frames = 7;
  e.media_limits.max_pixels = 12345;
  e.kv_method = "kivi2:residual=64";
  e.kv_budget_bytes = 3ull << 30;
  e.kv_page_bytes = 4096;
  e.n_threads = 3;
  e.n_ctx = 777;
  e.n_batch = 33;
  e.exact_matmul = true;
  const nlohmann::json j = params_to_json(e);
  EXPECT_EQ(j.size(), rows<EngineParams>().size());  // one key per row, no two rows share a name
  EngineParams back;
  ASSERT_TRUE(params_from_json(j, back).is_ok());
  EXPECT_EQ(params_to_json(back), j);
  EXPECT_EQ(back.model_path, "m.gguf");
  EXPECT_EQ(back.media_limits.max_pixels, 12345);
  EXPECT_EQ(back.kv_budget_bytes, 3ull << 30);
  EXPECT_TRUE(back.exact_matmul);

  SamplerParams s;
  s.temperature = 0.25f;
  s.top_k = 3;
  s.seed = 42;
  SamplerParams sback;
  ASSERT_TRUE(params_from_json(params_to_json(s), sback).is_ok());
  EXPECT_EQ(params_to_json(sback), params_to_json(s));
  EXPECT_EQ(sback.seed, 42u);

  // Refused: a key no row names, a wrong type, a value outside the row's range.
  EXPECT_FALSE(params_from_json(nlohmann::json{{"n_thread", 2}}, back).is_ok());
  EXPECT_FALSE(params_from_json(nlohmann::json{{"n_threads", "two"}}, back).is_ok());
  EXPECT_EQ(params_from_json(nlohmann::json{{"n_batch", 0}}, back).message(),
            check_param(rows<EngineParams>().at("n_batch"), 0).message());
}

// The message a command prints for `flag value`, from parsing alone (no model is loaded).
std::string cli_error(const std::string& command, const std::string& flag, const std::string& value) {
  Cli cli;
  try {
    cli.root.parse(std::vector<std::string>{value, flag, "m.gguf", "-m", command});  // CLI11 reads it reversed
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(ParamTable, BadValuesGetOneMessageInCliAndServer) {
  struct Bad {
    const char* json;
    double value;
  };
  const auto sampling = rows<SamplerParams>();
  for (const Bad& b : {Bad{"top_p", 0}, Bad{"top_p", 1.5}, Bad{"min_p", -0.5}, Bad{"min_p", 2},
                       Bad{"repeat_penalty", 0}, Bad{"repeat_penalty", -1}}) {
    const ParamField& info = sampling.at(b.json);
    const std::string message = check_param(info, b.value).message();
    ASSERT_FALSE(message.empty()) << b.json;
    const std::string value = nlohmann::json(b.value).dump();
    EXPECT_NE(cli_error("run", info.flags, value).find(message), std::string::npos)
        << b.json << ": " << cli_error("run", info.flags, value) << " vs " << message;
    const nlohmann::json body = {{"prompt", "hi"}, {b.json, b.value}};
    Result<server::ApiRequest> r = server::parse_request(body.dump(), server::Endpoint::kCompletion, {});
    ASSERT_FALSE(r.is_ok()) << b.json;
    EXPECT_EQ(r.status().message(), message);
  }
  // Engine rows: the flag and Engine::load (before any file is read) say the same.
  const auto engine = rows<EngineParams>();
  struct EngineBad {
    const char* json;
    int64_t value;
    void (*set)(EngineParams&, int64_t);
  };
  for (const EngineBad& b :
       {EngineBad{"n_threads", 100000, [](EngineParams& p, int64_t v) { p.n_threads = static_cast<int>(v); }},
        EngineBad{"n_batch", 0, [](EngineParams& p, int64_t v) { p.n_batch = v; }},
        EngineBad{"n_ctx", -1, [](EngineParams& p, int64_t v) { p.n_ctx = v; }}}) {
    const std::string message = check_param(engine.at(b.json), static_cast<double>(b.value)).message();
    for (const char* command : {"run", "serve"}) {
      const std::string err = cli_error(command, long_flag(engine.at(b.json).flags), std::to_string(b.value));
      EXPECT_NE(err.find(message), std::string::npos) << command << ": " << err << " vs " << message;
    }
    EngineParams p;
    p.model_path = "/nonexistent/model.gguf";
    b.set(p, b.value);
    Result<std::unique_ptr<Engine>> e = Engine::load(p);
    ASSERT_FALSE(e.is_ok());
    EXPECT_EQ(e.status().message(), message);
  }
}

}  // namespace
}  // namespace vlkv
