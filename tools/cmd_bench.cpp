// `vlkv bench`: prefill and decode speed, KV bytes and peak memory per
// (KV method, context length), as a fixed-column table or JSON lines.
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <sys/resource.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "kv_flags.h"
#include "vlkv/engine.h"

namespace vlkv::cli {
namespace {

struct BenchOptions {
  EngineParams engine;
  std::string methods = "f16";
  std::string contexts = "128,1K,4K";
  std::string kv_budget = "8G";
  int64_t n_decode = 32;
  int repetitions = 1;
  bool json = false;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Result<int64_t> parse_count(const std::string& s) {
  Result<uint64_t> v = parse_byte_size(s);  // "1K" = 1024, as llama-bench's depths
  if (!v.is_ok() || *v == 0 || *v > (1ull << 24)) return invalid_argument("bad context length '" + s + "'");
  return static_cast<int64_t>(*v);
}

uint64_t peak_rss_bytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;
}

struct Row {
  std::string method;
  int64_t ctx = 0;
  double prefill_tok_s = 0, decode_tok_s = 0;
  double kv_bytes_per_token = 0, bits_per_elem = 0;
  uint64_t peak_rss = 0;
  int64_t max_seqs = 0;
};

Result<Row> bench_one(const BenchOptions& o, const std::string& method, int64_t ctx) {
  using Clock = std::chrono::steady_clock;
  EngineParams ep = o.engine;
  ep.kv_method = method;
  ep.n_ctx = ctx + o.n_decode + 1;
  VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::load(ep));
  Row row;
  row.method = method;
  row.ctx = ctx;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(engine->info().n_vocab - 1));
  std::vector<int32_t> prompt(static_cast<size_t>(ctx));
  for (auto& t : prompt) t = tok(rng);

  double best_prefill = 1e30, best_decode = 1e30;
  for (int rep = 0; rep < o.repetitions; ++rep) {
    VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, engine->new_session());
    std::vector<float> logits;
    auto t0 = Clock::now();
    VLKV_RETURN_IF_ERROR(s->eval(prompt, false, &logits));
    best_prefill = std::min(best_prefill, std::chrono::duration<double>(Clock::now() - t0).count());
    auto t1 = Clock::now();
    for (int64_t i = 0; i < o.n_decode; ++i) VLKV_RETURN_IF_ERROR(s->eval({tok(rng)}, false, &logits));
    best_decode = std::min(best_decode, std::chrono::duration<double>(Clock::now() - t1).count());
    row.kv_bytes_per_token = static_cast<double>(engine->kv_bytes_in_use()) / static_cast<double>(s->n_past());
  }
  row.prefill_tok_s = ctx / best_prefill;
  row.decode_tok_s = o.n_decode > 0 ? o.n_decode / best_decode : 0;
  row.bits_per_elem = engine->kv_bits_per_element();
  row.peak_rss = peak_rss_bytes();
  const double seq_bytes = row.kv_bytes_per_token * static_cast<double>(ctx);
  row.max_seqs = seq_bytes > 0 ? static_cast<int64_t>(static_cast<double>(ep.kv_budget_bytes) / seq_bytes) : 0;
  return row;
}

int bench(const BenchOptions& o_in) {
  BenchOptions o = o_in;
  Result<uint64_t> budget = parse_byte_size(o.kv_budget);
  if (!budget.is_ok()) return report_error(budget.status().with_context("--kv-budget"));
  o.engine.kv_budget_bytes = *budget;
  std::vector<int64_t> contexts;
  for (const std::string& c : split(o.contexts, ',')) {
    Result<int64_t> v = parse_count(c);
    if (!v.is_ok()) return report_error(v.status());
    contexts.push_back(*v);
  }
  const std::vector<std::string> methods = split(o.methods, ',');
  if (methods.empty() || contexts.empty()) return report_error(invalid_argument("no methods or contexts given"));
  if (!o.json) {
    std::printf("%-28s %-10s %7s %12s %12s %14s %10s %12s %10s\n", "model", "method", "ctx", "prefill t/s",
                "decode t/s", "KV B/token", "bits/elem", "peak RSS MiB", "max seqs");
  }
  std::string model = o.engine.model_path;
  if (size_t slash = model.find_last_of('/'); slash != std::string::npos) model = model.substr(slash + 1);
  for (const std::string& m : methods) {
    for (int64_t ctx : contexts) {
      Result<Row> r = bench_one(o, m, ctx);
      if (!r.is_ok()) return report_error(r.status());
      const Row& row = *r;
      if (o.json) {
        nlohmann::json j = {{"model", model},
                            {"method", row.method},
                            {"ctx", row.ctx},
                            {"prefill_tok_s", row.prefill_tok_s},
                            {"decode_tok_s", row.decode_tok_s},
                            {"kv_bytes_per_token", row.kv_bytes_per_token},
                            {"bits_per_elem", row.bits_per_elem},
                            {"peak_rss_bytes", row.peak_rss},
                            {"max_seqs_in_budget", row.max_seqs},
                            {"threads", o.engine.n_threads},
                            {"n_decode", o.n_decode}};
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf("%-28s %-10s %7lld %12.1f %12.2f %14.1f %10.2f %12.1f %10lld\n", model.c_str(),
                    row.method.c_str(), static_cast<long long>(row.ctx), row.prefill_tok_s, row.decode_tok_s,
                    row.kv_bytes_per_token, row.bits_per_elem, row.peak_rss / 1048576.0,
                    static_cast<long long>(row.max_seqs));
      }
      std::fflush(stdout);
    }
  }
  return kExitOk;
}

}  // namespace

void add_bench_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* app = root.add_subcommand("bench", "Measure prefill/decode speed and KV memory per method and context");
  app->add_option("-m,--model", o->engine.model_path, "Model GGUF file")->required();
  app->add_option("--kv", o->methods, "Comma-separated KV methods, e.g. f16,f32")->capture_default_str();
  app->add_option("--ctx", o->contexts, "Comma-separated context lengths (prompt tokens), e.g. 128,1K,4K")
      ->capture_default_str();
  app->add_option("--kv-budget", o->kv_budget, "KV budget used for max-seqs and allocation")->capture_default_str();
  app->add_option("-n,--n-decode", o->n_decode, "Decode steps measured after the prefill")
      ->check(CLI::Range(0, 1 << 20))->capture_default_str();
  app->add_option("-r,--repetitions", o->repetitions, "Repetitions (best is reported)")
      ->check(CLI::Range(1, 100))->capture_default_str();
  app->add_option("-t,--threads", o->engine.n_threads, "Threads (0: all cores)")->capture_default_str();
  app->add_option("-b,--batch-size", o->engine.n_batch, "Prompt tokens per forward pass")->capture_default_str();
  app->add_flag("--json", o->json, "One JSON object per line per (method, ctx)");
  commands.push_back({app, [o] { return bench(*o); }});
}

}  // namespace vlkv::cli
