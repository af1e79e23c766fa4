// Runs the built vlkv executable and captures stdout, stderr and exit status.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

namespace vlkv::testing_cli {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}

// args are shell-quoted one by one; stdin_text (when given) is the command's standard input.
inline CliResult run_cli(const std::vector<std::string>& args, const std::string* stdin_text = nullptr) {
  static int counter = 0;
  const std::string err_path = ::testing::TempDir() + "vlkv_cli_err_" + std::to_string(getpid()) + "_" +
                               std::to_string(counter++) + ".txt";
  std::string cmd = shell_quote(VLKV_CLI_PATH);
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.
  for (const std::string& a : args) {
    cmd += ' ';
    cmd += shell_quote(a);
  }
  cmd += " 2>";
  cmd += shell_quote(err_path);
  const std::string in_path = err_path + ".in";
  if (stdin_text) {
    std::ofstream(in_path, std::ios::binary) << *stdin_text;
    cmd += " <";
    cmd += shell_quote(in_path);
  }
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  std::ifstream e(err_path);
  r.err.assign((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  std::remove(err_path.c_str());
  if (stdin_text) std::remove(in_path.c_str());
  return r;
}

}  // namespace vlkv::testing_cli
