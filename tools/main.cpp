// vlkv: the command-line front end. Subcommands live in tools/cmd_<name>.cpp.
#include <cstdio>
#include <exception>

#include "commands.h"

int main(int argc, char** argv) {
  using namespace vlkv::cli;
  CLI::App app{"vlkv — VLM inference with a compressed KV cache"};
  app.require_subcommand(1);
  std::vector<Command> commands;
  add_run_command(app, commands);
  add_chat_command(app, commands);
  add_info_command(app, commands);
  add_bench_command(app, commands);
  add_gen_model_command(app, commands);
  add_quantize_command(app, commands);
  add_eval_command(app, commands);
  add_calibrate_command(app, commands);
  add_serve_command(app, commands);
  add_bench_serve_command(app, commands);
  // llama-server's "-np N" (slots) is two letters after one dash, which CLI11 reads as
  // -n -p: spelled out as --parallel before parsing.
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) args.push_back(std::string(argv[i]) == "-np" ? "--parallel" : argv[i]);
  try {
    app.parse(args);  // CLI11 takes the arguments in reverse order
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitBadInput;
  }
  try {
    for (const Command& c : commands) {
      if (c.app->parsed()) return c.run();
    }
  } catch (const std::exception& e) {  // e.g. std::bad_alloc: report, never crash silently
    std::fprintf(stderr, "vlkv: error: %s\n", e.what());
    return kExitFailure;
  }
  return kExitBadInput;
}
