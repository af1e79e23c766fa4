// Subcommands of the vlkv executable. Each tools/cmd_<name>.cpp registers one
// CLI11 subcommand and the action to run when it is chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

#include "vlkv/status.h"

namespace vlkv::cli {

// Exit statuses: 0 ok, 1 runtime failure, 2 bad input (file, flag or request).
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

void add_run_command(CLI::App& root, std::vector<Command>& commands);
void add_chat_command(CLI::App& root, std::vector<Command>& commands);
void add_info_command(CLI::App& root, std::vector<Command>& commands);
void add_bench_command(CLI::App& root, std::vector<Command>& commands);
void add_gen_model_command(CLI::App& root, std::vector<Command>& commands);
void add_quantize_command(CLI::App& root, std::vector<Command>& commands);
void add_eval_command(CLI::App& root, std::vector<Command>& commands);
void add_calibrate_command(CLI::App& root, std::vector<Command>& commands);
void add_serve_command(CLI::App& root, std::vector<Command>& commands);
void add_bench_serve_command(CLI::App& root, std::vector<Command>& commands);
void add_methods_command(CLI::App& root, std::vector<Command>& commands);

// Prints "vlkv: <message>" to stderr and returns the exit status for the Status code.
int report_error(const Status& status);

}  // namespace vlkv::cli
