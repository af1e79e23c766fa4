// vlkv: the command-line front end. Subcommands live in tools/cmd_<name>.cpp; llama.cpp's
// flag habits are translated first (llama_compat.h).
#include <cstdio>
#include <algorithm>
#include <exception>

#include "commands.h"
#include "help_formatter.h"
#include "llama_compat.h"
#include "version.h"

namespace {

using namespace vlkv::cli;

// `vlkv` alone: what it is, its commands and a first command line.
void print_overview(CLI::App& app) {
  std::printf("%s\n\nUsage: vlkv COMMAND [flags]   (vlkv COMMAND --help lists a command's flags)\n\nCommands:\n",
              app.get_description().c_str());
  for (const CLI::App* sub : app.get_subcommands({})) {
    std::string what = sub->get_description();  // its first line, up to a ';' (the rest is for --help)
    what = what.substr(0, std::min(what.find('\n'), what.find("; ")));
    std::printf("  %-12s %s\n", sub->get_name().c_str(), what.c_str());
  }
  std::printf(
      "\nTry the bundled model:\n"
      "  vlkv run -m models/tinyvlm-shapes.gguf --mmproj models/tinyvlm-shapes-mmproj.gguf \\\n"
      "           --image models/demo/005.png -p \"What shape is this?\" --kv kivi2\n"
      "\nllama.cpp's flags work where they mean the same (-m, --mmproj, -p, -f, -n, -c, -t, -s, --temp, --image, -np,\n"
      "-cnv for chat); GPU flags (-ngl, -fa, -mg, ...) are ignored: vlkv runs on the CPU. vlkv --version.\n");
}

std::vector<std::string> subcommand_names(CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

// Every flag name of the parsed subcommand (or the root), for "did you mean".
std::vector<std::string> flag_names(CLI::App& app) {
  CLI::App* where = &app;
  for (CLI::App* sub : app.get_subcommands()) where = sub;
  std::vector<std::string> names;
  for (const CLI::Option* opt : where->get_options()) {
    for (const std::string& n : opt->get_lnames()) names.push_back("--" + n);
    for (const std::string& n : opt->get_snames()) names.push_back("-" + n);
  }
  return names;
}

int refuse(const std::string& message) {
  std::fprintf(stderr, "vlkv: error: %s\n", message.c_str());
  return kExitBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vlkv - vision-language models on the CPU with a compressed KV cache"};
  app.name("vlkv");
  use_compact_help(app);  // before the subcommands: they take the root's formatter when added
  app.set_version_flag("--version", [] { return version_text(); }, "Print the version, commit and SIMD tier");
  app.require_subcommand(1);
  app.allow_extras();  // unknown flags are reported below, with the closest known one
  std::vector<Command> commands;
  add_run_command(app, commands);
  add_chat_command(app, commands);
  add_serve_command(app, commands);
  add_bench_command(app, commands);
  add_eval_command(app, commands);
  add_calibrate_command(app, commands);
  add_methods_command(app, commands);
  add_info_command(app, commands);
  add_quantize_command(app, commands);
  add_gen_model_command(app, commands);
  add_bench_serve_command(app, commands);
  if (argc <= 1) {
    print_overview(app);
    return kExitOk;
  }
  const std::vector<std::string> names = subcommand_names(app);
  const TranslatedArgs translated = translate_llama_cpp_args(std::vector<std::string>(argv + 1, argv + argc), names);
  for (const std::string& note : translated.notes) std::fprintf(stderr, "vlkv: note: %s\n", note.c_str());
  if (!translated.error.empty()) return refuse(translated.error);
  const std::string& first = translated.args.front();
  if (first[0] != '-' && std::find(names.begin(), names.end(), first) == names.end()) {
    const std::string near = closest_flag(first, names);
    return refuse("no command '" + first + "'" + (near.empty() ? "" : " (did you mean " + near + "?)") +
                  "; `vlkv` alone lists the commands");
  }
  std::vector<std::string> args(translated.args.rbegin(), translated.args.rend());  // CLI11 takes them reversed
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitBadInput;
  }
  if (const std::vector<std::string> extra = app.remaining(true); !extra.empty()) {
    std::string command = "vlkv";
    for (CLI::App* sub : app.get_subcommands()) command += " " + sub->get_name();
    if (extra[0].empty() || extra[0][0] != '-') return refuse("unexpected argument '" + extra[0] + "' for `" + command + "`");
    const std::string near = closest_flag(extra[0], flag_names(app));
    return refuse("unknown flag '" + extra[0] + "' for `" + command + "`" +
                  (near.empty() ? "" : " (did you mean " + near + "?)") + "; `" + command + " --help` lists them");
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
