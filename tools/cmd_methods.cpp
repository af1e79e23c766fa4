// vlkv methods [NAME]: the KV cache methods, one line each, or one method's parameters with
// their defaults - the catalogue the other commands' --help points to instead of repeating it.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "kv/method_registry.h"

namespace vlkv::cli {
namespace {

// The first sentence of a method's help: its one-line summary.
std::string summary(const std::string& help) {
  const size_t end = help.find(". ");
  return end == std::string::npos ? help : help.substr(0, end + 1);
}

int run(const std::string& name) {
  if (name.empty()) {
    for (const MethodInfo* m : list_methods()) std::printf("%-12s %s\n", m->name.c_str(), summary(m->help).c_str());
    std::printf("\nUse one with --kv NAME[:key=value,...]; compose a wrapper with a storage method as "
                "qcache_vla+vidkv.\n`vlkv methods NAME` lists a method's parameters.\n");
    return kExitOk;
  }
  for (const MethodInfo* m : list_methods()) {
    if (m->name != name) continue;
    std::printf("%s: %s\n", m->name.c_str(), m->help.c_str());
    if (m->params.empty()) std::printf("\nNo parameters.\n");
    else std::printf("\nParameters (--kv %s:key=value,...; defaults shown):\n", m->name.c_str());
    for (const auto& p : m->params) std::printf("  %s=%s\n      %s\n", p.name.c_str(), p.default_value.c_str(), p.help.c_str());
    return kExitOk;
  }
  std::string names;
  for (const MethodInfo* m : list_methods()) names += (names.empty() ? "" : ", ") + m->name;
  return report_error(invalid_argument("no KV method '" + name + "'; registered: " + names));
}

}  // namespace

void add_methods_command(CLI::App& root, std::vector<Command>& commands) {
  auto name = std::make_shared<std::string>();
  CLI::App* app = root.add_subcommand("methods", "List the KV cache methods, or one method's parameters");
  app->add_option("name", *name, "A method's name (e.g. kivi2)");
  commands.push_back({app, [name] { return run(*name); }});
}

}  // namespace vlkv::cli
