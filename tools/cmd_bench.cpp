// `vlkv bench`: prefill and decode speed, KV bytes and peak memory per
// (KV method, context length), as a fixed-column table or JSON lines.
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <vector>

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
  bool no_bandwidth = false;
  double read_gb_s = 0;  // measured streaming read bandwidth (threads as -t)
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
  double kv_bytes_per_token = 0;       // the method's steady-state bytes per token (all layers, K and V)
  double kv_held_bytes_per_token = 0;  // pages actually held / tokens, after the decode steps
  double bits_per_elem = 0;
  double roofline_pct = 0;             // (weights + KV bytes read per token) x decode tok/s / read bandwidth
  uint64_t peak_rss = 0;
  int64_t max_seqs = 0;
  uint64_t weight_bytes = 0;
};

// Streaming read bandwidth of n_threads threads over a 512 MiB buffer (best of 5):
// the roofline's denominator. Measured in the same run as the rows it divides.
double measure_read_gb_s(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const size_t n = (512ull << 20) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n, 1);
  double best = 0;
  std::vector<uint64_t> sums(n_threads);
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> th;
    for (int t = 0; t < n_threads; ++t)
      th.emplace_back([&, t] {
        const size_t lo = n * t / n_threads, hi = n * (t + 1) / n_threads;
        uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;  // four chains: the loop vectorizes, loads dominate
        for (size_t i = lo; i + 4 <= hi; i += 4) {
          a0 += buf[i];
          a1 += buf[i + 1];
          a2 += buf[i + 2];
          a3 += buf[i + 3];
        }
        sums[t] = a0 + a1 + a2 + a3;
      });
    for (auto& x : th) x.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / secs / 1e9);
  }
  uint64_t total = 0;
  for (uint64_t x : sums) total += x;
  return total == n ? best : best;  // total keeps the sums alive
}

Result<Row> bench_one(const BenchOptions& o, const std::string& method, int64_t ctx) {
  using Clock = std::chrono::steady_clock;
  EngineParams ep = o.engine;
  ep.kv_method = method;
  ep.n_ctx = ctx + o.n_decode + 1;
  Result<std::unique_ptr<Engine>> loaded = Engine::load(ep);
  if (!loaded.is_ok()) return check_kv_load_error(loaded.status(), method);
  std::unique_ptr<Engine> engine = std::move(*loaded);
  const ModelInfo& info = engine->info();
  if (info.n_ctx_train > 0 && ep.n_ctx > info.n_ctx_train)
    return invalid_argument("--ctx " + std::to_string(ctx) + ": " + std::to_string(ctx) + " + " +
                            std::to_string(o.n_decode) + " decode tokens exceed the model's context of " +
                            std::to_string(info.n_ctx_train) + " tokens");
  VLKV_RETURN_IF_ERROR(check_kv_budget_for_model(ep.kv_budget_bytes, o.kv_budget, info));
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
    row.kv_held_bytes_per_token = static_cast<double>(engine->kv_bytes_in_use()) / static_cast<double>(s->n_past());
  }
  row.prefill_tok_s = ctx / best_prefill;
  row.decode_tok_s = o.n_decode > 0 ? o.n_decode / best_decode : 0;
  row.bits_per_elem = engine->kv_bits_per_element();
  row.kv_bytes_per_token = row.bits_per_elem / 8.0 * 2.0 * static_cast<double>(info.n_layers) *
                           static_cast<double>(info.n_kv_heads) * static_cast<double>(info.head_dim);
  row.peak_rss = peak_rss_bytes();
  // Sequences of ctx + n_decode tokens that fit the budget, at the bytes one such sequence held.
  const double seq_bytes = row.kv_held_bytes_per_token * static_cast<double>(ctx + o.n_decode);
  row.max_seqs = seq_bytes > 0 ? static_cast<int64_t>(static_cast<double>(ep.kv_budget_bytes) / seq_bytes) : 0;
  // Bytes one decode step reads: all weights once, the KV cache at the mean decode depth.
  const double kv_read = row.kv_bytes_per_token * (static_cast<double>(ctx) + 0.5 * static_cast<double>(o.n_decode));
  if (o.read_gb_s > 0)
    row.roofline_pct = 100.0 * (static_cast<double>(info.weight_bytes) + kv_read) * row.decode_tok_s / (o.read_gb_s * 1e9);
  row.weight_bytes = info.weight_bytes;
  return row;
}

int bench(const BenchOptions& o_in) {
  BenchOptions o = o_in;
  Result<uint64_t> budget = parse_kv_budget_flag(o.kv_budget);
  if (!budget.is_ok()) return report_error(budget.status());
  o.engine.kv_budget_bytes = *budget;
  std::vector<int64_t> contexts;
  for (const std::string& c : split(o.contexts, ',')) {
    Result<int64_t> v = parse_count(c);
    if (!v.is_ok()) return report_error(v.status().with_context("--ctx"));
    contexts.push_back(*v);
  }
  const std::vector<std::string> methods = split(o.methods, ',');
  if (methods.empty() || contexts.empty()) return report_error(invalid_argument("no methods or contexts given"));
  for (const std::string& m : methods) {
    Status st = check_kv_method_flag(m);
    if (!st.is_ok()) return report_error(st);
  }
  if (!o.no_bandwidth) o.read_gb_s = measure_read_gb_s(o.engine.n_threads);
  if (!o.json) {
    std::printf("# prefill: the decoder over ctx random tokens in batches of %lld (real prefill, full-precision "
                "attention); decode: %lld steps after it, one token each\n",
                static_cast<long long>(o.engine.n_batch), static_cast<long long>(o.n_decode));
    std::printf("# KV B/tok: method's steady-state bytes per token; held B/tok: pool pages held / tokens (window, "
                "page tails included); max seqs: sequences of ctx+n tokens in --kv-budget %s\n", o.kv_budget.c_str());
    if (o.read_gb_s > 0)
      std::printf("# roofline: (weight bytes + KV B/tok x depth) x decode tok/s / %.2f GB/s measured read bandwidth "
                  "(%d threads)\n", o.read_gb_s, o.engine.n_threads);
    std::printf("%-24s %-10s %7s %11s %10s %10s %10s %9s %12s %9s %9s\n", "model", "method", "ctx", "prefill t/s",
                "decode t/s", "KV B/tok", "held B/tok", "bits/elem", "peak RSS MiB", "max seqs", "roofline");
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
                            {"kv_held_bytes_per_token", row.kv_held_bytes_per_token},
                            {"weight_bytes", row.weight_bytes},
                            {"read_bandwidth_gb_s", o.read_gb_s},
                            {"roofline_pct", row.roofline_pct},
                            {"prefill_mode", "real"},
                            {"bits_per_elem", row.bits_per_elem},
                            {"peak_rss_bytes", row.peak_rss},
                            {"max_seqs_in_budget", row.max_seqs},
                            {"threads", o.engine.n_threads},
                            {"n_decode", o.n_decode}};
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf("%-24s %-10s %7lld %11.1f %10.2f %10.0f %10.0f %9.2f %12.1f %9lld %8.0f%%\n", model.c_str(),
                    row.method.c_str(), static_cast<long long>(row.ctx), row.prefill_tok_s, row.decode_tok_s,
                    row.kv_bytes_per_token, row.kv_held_bytes_per_token, row.bits_per_elem,
                    row.peak_rss / 1048576.0, static_cast<long long>(row.max_seqs), row.roofline_pct);
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
  app->add_option("--kv", o->methods, kv_method_help(true))->capture_default_str();
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
  app->add_flag("--no-bandwidth", o->no_bandwidth, "Skip the read-bandwidth measurement (no roofline column)");
  commands.push_back({app, [o] { return bench(*o); }});
}

}  // namespace vlkv::cli
