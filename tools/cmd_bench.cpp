// `vlkv bench`: prefill and decode speed, KV bytes and peak memory per
// (KV method, context length), as a fixed-column table or JSON lines.
// Depth: --fill random (default) stores random K/V rows through the method's store path
// (Session::fill_kv_for_benchmark) and times the decode steps over them, prefill being
// timed apart on --prefill-tokens real tokens; --fill prefill reaches the depth with a
// real prefill of ctx tokens (minutes at 8K+ on a laptop-class CPU) and times that.
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/cpu_features.h"
#include "base/process_cpu_time.h"
#include "bench_media.h"
#include "commands.h"
#include "hub_flags.h"
#include "kv_flags.h"
#include "media_flags.h"
#include "param_flags.h"
#include "bench_json.h"
#include "vlkv/engine.h"

namespace vlkv::cli {
namespace {

enum class Fill { kRandom, kPrefill };

struct BenchOptions {
  EngineParams engine;
  std::string methods = "f16";
  std::string contexts = "128,1K,4K";
  bool contexts_given = false;  // --ctx on the command line (else the default depths fit the model)
  std::string kv_budget = kKvBudgetAuto;  // the one default rule: tools/kv_flags.h
  Fill fill = Fill::kRandom;
  int64_t prefill_tokens = 512;  // --fill random: the prefill column's prompt (clamped to the model's context)
  int64_t n_decode = 32;
  int repetitions = 1;
  bool json = false;
  bool no_bandwidth = false;
  int method_width = 10;  // the table's method column: the longest --kv spec
  double read_gb_s = 0;  // measured streaming read bandwidth (threads as -t)
  // --parallel: sequences decoding together ("max": as many as --kv-budget admits); empty:
  // one session decoding alone through Session::eval (the rows' parallel is 1).
  std::string parallel;
  // --image/--video (with --mmproj): time to first token of one media question instead (bench_media.h).
  BenchMediaOptions media;
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
  int64_t prefill_tokens = 0;          // tokens the prefill column timed (ctx with --fill prefill)
  double fill_seconds = 0;             // bringing the cache to ctx (random K/V, or the real prefill)
  double load_ms = 0;                  // Engine::load of the method's engine (mapping, binding, the repack)
  double prefill_tok_s = 0, decode_tok_s = 0;
  double kv_bytes_per_token = 0;       // the method's steady-state bytes per token (all layers, K and V)
  double kv_held_bytes_per_token = 0;  // pages actually held / tokens, after the decode steps
  double bits_per_elem = 0;
  double roofline_pct = 0;             // (weights + KV bytes read per token) x decode tok/s / read bandwidth
  bool roofline_meaningful = false;    // the bytes a step reads exceed the last-level cache and pct <= 100
  int threads = 0;                     // the engine's real thread count
  uint64_t peak_rss = 0;
  int64_t max_seqs = 0;
  uint64_t weight_bytes = 0;
  int64_t parallel = 1;                 // sequences decoding together
  double seq_decode_tok_s = 0;          // per sequence (decode_tok_s is the aggregate)
  double kv_stored_bytes_per_token = 0; // exact codec bytes / tokens (windows included, page tails not)
  // Process CPU seconds (all threads) per generated token over the fastest decode loop: on a
  // shared machine the wall rate moves with other load, this far less (a spinning pool
  // thread counts too, as it would on an idle machine).
  double decode_cpu_ms_per_token = 0;
};


// Size of the largest CPU cache (sysconf; 32 MiB when the OS does not say).
double last_level_cache_bytes() {
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const long best = std::max(l3, l2);
  return best > 0 ? static_cast<double>(best) : 32.0 * 1048576.0;
}

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

// Greedy-free random prompt tokens (ids 3.. skip the usual BOS/EOS/UNK).
std::vector<int32_t> random_tokens(std::mt19937& rng, int64_t n_vocab, int64_t n) {
  std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(n_vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = tok(rng);
  return t;
}

// Best of o.repetitions: seconds of a real prefill of n tokens on a fresh session.
Result<double> time_prefill(const BenchOptions& o, Engine& engine, int64_t n, std::mt19937& rng) {
  using Clock = std::chrono::steady_clock;
  const std::vector<int32_t> prompt = random_tokens(rng, engine.info().n_vocab, n);
  double best = 1e30;
  for (int rep = 0; rep < o.repetitions; ++rep) {
    VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, engine.new_session());
    std::vector<float> logits;
    const auto t0 = Clock::now();
    VLKV_RETURN_IF_ERROR(s->eval(prompt, false, &logits));
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

void finish_row(const BenchOptions& o, Engine& engine, int64_t ctx, Row& row);

// One (method, ctx) row. prefill_seconds < 0: measure it here (--fill prefill always does).
Result<Row> bench_one(const BenchOptions& o, Engine& engine, const std::string& method, int64_t ctx,
                      double prefill_seconds) {
  using Clock = std::chrono::steady_clock;
  const ModelInfo& info = engine.info();
  Row row;
  row.method = method;
  row.ctx = ctx;
  std::mt19937 rng(1234);
  const std::vector<int32_t> prompt =
      o.fill == Fill::kPrefill ? random_tokens(rng, info.n_vocab, ctx) : std::vector<int32_t>{};
  std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(info.n_vocab - 1));
  double best_prefill = 1e30, best_decode = 1e30;
  for (int rep = 0; rep < o.repetitions; ++rep) {
    VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, engine.new_session());
    std::vector<float> logits;
    auto t0 = Clock::now();
    if (o.fill == Fill::kPrefill) VLKV_RETURN_IF_ERROR(s->eval(prompt, false, &logits));
    else VLKV_RETURN_IF_ERROR(s->fill_kv_for_benchmark(ctx, /*seed=*/1234 + static_cast<uint64_t>(rep)));
    best_prefill = std::min(best_prefill, std::chrono::duration<double>(Clock::now() - t0).count());
    row.fill_seconds = best_prefill;
    auto t1 = Clock::now();
    const double c1 = process_cpu_seconds();
    for (int64_t i = 0; i < o.n_decode; ++i) VLKV_RETURN_IF_ERROR(s->eval({tok(rng)}, false, &logits));
    const double wall = std::chrono::duration<double>(Clock::now() - t1).count();
    if (wall < best_decode && o.n_decode > 0)
      row.decode_cpu_ms_per_token = 1e3 * (process_cpu_seconds() - c1) / static_cast<double>(o.n_decode);
    best_decode = std::min(best_decode, wall);
    row.kv_held_bytes_per_token = static_cast<double>(engine.kv_bytes_in_use()) / static_cast<double>(s->n_past());
    row.kv_stored_bytes_per_token = s->kv_stored_bytes() / static_cast<double>(s->n_past());
  }
  if (o.fill == Fill::kPrefill) {
    row.prefill_tokens = ctx;
    row.prefill_tok_s = static_cast<double>(ctx) / best_prefill;
  } else {
    row.prefill_tokens = o.prefill_tokens;
    row.prefill_tok_s = static_cast<double>(o.prefill_tokens) / prefill_seconds;
  }
  row.decode_tok_s = o.n_decode > 0 ? static_cast<double>(o.n_decode) / best_decode : 0;
  row.seq_decode_tok_s = row.decode_tok_s;
  finish_row(o, engine, ctx, row);
  return row;
}

// The columns every row derives from its measurements: bits, bytes per token, capacity, roofline.
void finish_row(const BenchOptions& o, Engine& engine, int64_t ctx, Row& row) {
  const ModelInfo& info = engine.info();
  row.bits_per_elem = engine.kv_bits_per_element();
  row.kv_bytes_per_token = row.bits_per_elem / 8.0 * 2.0 * static_cast<double>(info.n_layers) *
                           static_cast<double>(info.n_kv_heads) * static_cast<double>(info.head_dim);
  row.peak_rss = peak_rss_bytes();
  // Sequences of ctx + n_decode tokens that fit the budget, at the bytes one such sequence held.
  const double seq_bytes = row.kv_held_bytes_per_token * static_cast<double>(ctx + o.n_decode);
  row.max_seqs = seq_bytes > 0 ? static_cast<int64_t>(static_cast<double>(engine.params().kv_budget_bytes) / seq_bytes)
                               : 0;
  // Bytes one decode step reads: all weights once, the KV cache at the mean decode depth.
  const double kv_read = row.kv_bytes_per_token * (static_cast<double>(ctx) + 0.5 * static_cast<double>(o.n_decode));
  // (Parallel rows: the weights once per step, every sequence's cache.)
  const double step_bytes = static_cast<double>(info.weight_bytes) + kv_read * static_cast<double>(row.parallel);
  if (o.read_gb_s > 0) row.roofline_pct = 100.0 * step_bytes * row.seq_decode_tok_s / (o.read_gb_s * 1e9);
  // A step whose bytes fit the last-level cache (a small model) is not bound by DRAM reads:
  // its "roofline" can read 117-174% and says nothing; flagged rather than printed as a bound.
  row.roofline_meaningful = o.read_gb_s > 0 && row.roofline_pct <= 100.0 && step_bytes > 2.0 * last_level_cache_bytes();
  row.threads = engine.n_threads();
  row.weight_bytes = info.weight_bytes;
}

// Sequences of n_tokens the budget admits (Engine::kv_bytes_for_tokens, what the scheduler
// reserves) and the capacity line vLLM prints at start-up.
Result<int64_t> admitted_sequences(const BenchOptions& o, Engine& engine, int64_t n_tokens) {
  VLKV_ASSIGN_OR_RETURN(uint64_t per_seq, engine.kv_bytes_for_tokens(n_tokens));
  const uint64_t budget = engine.params().kv_budget_bytes;
  const int64_t n = per_seq > 0 ? static_cast<int64_t>(budget / per_seq) : 0;
  const bool gib = budget >= (1ull << 30);
  std::fprintf(o.json ? stderr : stdout, "# %s: KV budget %.1f %s: %lld sequences of %lld tokens, %.0fK tokens\n",
               engine.params().kv_method.c_str(), static_cast<double>(budget) / (gib ? 1ull << 30 : 1ull << 20),
               gib ? "GiB" : "MiB", static_cast<long long>(n), static_cast<long long>(n_tokens),
               static_cast<double>(n * n_tokens) / 1000.0);
  return n;
}

// One (method, ctx, parallel) row: one session brought to ctx (random K/V or a real
// prefill) and forked parallel - 1 times (its pages copied), then n_decode batched steps
// (Engine::decode_batch), each advancing every sequence by one token.
Result<Row> bench_parallel(const BenchOptions& o, Engine& engine, const std::string& method, int64_t ctx,
                           int64_t parallel, double prefill_seconds) {
  using Clock = std::chrono::steady_clock;
  const ModelInfo& info = engine.info();
  Row row;
  row.method = method;
  row.ctx = ctx;
  row.parallel = parallel;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(info.n_vocab - 1));
  double best_decode = 1e30;
  for (int rep = 0; rep < o.repetitions; ++rep) {
    std::vector<std::unique_ptr<Session>> sessions;
    VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Session> first, engine.new_session());
    const auto t0 = Clock::now();
    if (o.fill == Fill::kPrefill) {
      std::vector<float> logits;
      VLKV_RETURN_IF_ERROR(first->eval(random_tokens(rng, info.n_vocab, ctx), false, &logits));
    } else {
      VLKV_RETURN_IF_ERROR(first->fill_kv_for_benchmark(ctx, /*seed=*/1234 + static_cast<uint64_t>(rep)));
    }
    row.fill_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (o.fill == Fill::kPrefill) prefill_seconds = row.fill_seconds;
    sessions.push_back(std::move(first));
    for (int64_t i = 1; i < parallel; ++i) {
      VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, sessions[0]->fork());
      sessions.push_back(std::move(s));
    }
    std::vector<Session*> ptrs;
    for (auto& s : sessions) ptrs.push_back(s.get());
    std::vector<int32_t> tokens(ptrs.size());
    std::vector<std::vector<float>> logits;
    const auto t1 = Clock::now();
    const double c1 = process_cpu_seconds();
    for (int64_t i = 0; i < o.n_decode; ++i) {
      for (auto& t : tokens) t = tok(rng);
      VLKV_RETURN_IF_ERROR(engine.decode_batch(ptrs, tokens, &logits));
    }
    const double wall = std::chrono::duration<double>(Clock::now() - t1).count();
    if (wall < best_decode && o.n_decode > 0)
      row.decode_cpu_ms_per_token =
          1e3 * (process_cpu_seconds() - c1) / static_cast<double>(o.n_decode * parallel);
    best_decode = std::min(best_decode, wall);
    double stored = 0, n_tokens = 0;
    for (Session* s : ptrs) {
      stored += s->kv_stored_bytes();
      n_tokens += static_cast<double>(s->n_past());
    }
    row.kv_held_bytes_per_token = static_cast<double>(engine.kv_bytes_in_use()) / n_tokens;
    row.kv_stored_bytes_per_token = stored / n_tokens;
  }
  row.prefill_tokens = o.fill == Fill::kPrefill ? ctx : o.prefill_tokens;
  row.prefill_tok_s = static_cast<double>(row.prefill_tokens) / prefill_seconds;
  row.seq_decode_tok_s = o.n_decode > 0 ? static_cast<double>(o.n_decode) / best_decode : 0;
  row.decode_tok_s = row.seq_decode_tok_s * static_cast<double>(parallel);
  finish_row(o, engine, ctx, row);
  return row;
}

// The model's context must hold each row (depth + decode steps). --prefill-tokens is
// clamped to it (a small model's 512-token context would refuse the default 512 + n). The
// default depths (no --ctx) are cut to those the model holds, with a note, so that
// `vlkv bench -m small.gguf` prints what it can instead of failing; depths given are checked.
Result<int64_t> check_contexts(const BenchOptions& o, std::vector<int64_t>& contexts, int64_t n_ctx_train) {
  if (n_ctx_train <= 0) return o.prefill_tokens;
  const int64_t deepest = n_ctx_train - o.n_decode - 1;
  if (!o.contexts_given) {
    std::vector<int64_t> fit;
    for (int64_t ctx : contexts)
      if (ctx <= deepest) fit.push_back(ctx);
    if (fit.empty() && deepest > 0) fit.push_back(deepest);
    if (fit.size() != contexts.size() && !fit.empty()) {
      static bool noted = false;
      if (!noted)
        std::fprintf(stderr, "vlkv: note: the model's context is %lld tokens: depths deeper than %lld left out (--ctx "
                     "chooses them)\n", static_cast<long long>(n_ctx_train), static_cast<long long>(deepest));
      noted = true;
      contexts = fit;
    }
  }
  for (int64_t ctx : contexts) {
    if (ctx + o.n_decode + 1 > n_ctx_train)
      return invalid_argument("--ctx " + std::to_string(ctx) + ": " + std::to_string(ctx) + " + " +
                              std::to_string(o.n_decode) + " decode tokens exceed the model's context of " +
                              std::to_string(n_ctx_train) + " tokens (fewer -n, a shallower --ctx, or for a model "
                              "written by `vlkv gen-model` its --ctx)");
  }
  const int64_t prefill = std::min(o.prefill_tokens, deepest);
  if (o.fill == Fill::kRandom && prefill <= 0)
    return invalid_argument("--prefill-tokens: the model's context of " + std::to_string(n_ctx_train) +
                            " tokens leaves no room for a prefill before " + std::to_string(o.n_decode) +
                            " decode steps");
  return prefill;
}

// All rows of one method on one engine (its context holds the longest row and the prefill).
Status bench_method(const BenchOptions& o_in, const std::string& method, std::vector<int64_t> contexts,
                    const std::function<void(const Row&)>& emit) {
  BenchOptions o = o_in;
  EngineParams ep = o.engine;
  ep.kv_method = method;
  const int64_t longest = *std::max_element(contexts.begin(), contexts.end());
  ep.n_ctx = std::max(longest, o.fill == Fill::kRandom ? o.prefill_tokens : 0) + o.n_decode + 1;
  const auto load_start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<Engine>> loaded = Engine::load(ep);
  if (!loaded.is_ok()) return check_kv_load_error(loaded.status(), method);
  std::unique_ptr<Engine> engine = std::move(*loaded);
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  VLKV_ASSIGN_OR_RETURN(o.prefill_tokens, check_contexts(o, contexts, engine->info().n_ctx_train));
  VLKV_RETURN_IF_ERROR(check_kv_budget_for_model(ep.kv_budget_bytes, o.kv_budget, engine->info()));
  double prefill_seconds = -1;
  if (o.fill == Fill::kRandom) {
    std::mt19937 rng(99);
    VLKV_ASSIGN_OR_RETURN(prefill_seconds, time_prefill(o, *engine, o.prefill_tokens, rng));
  }
  for (int64_t ctx : contexts) {
    if (o.parallel.empty()) {
      VLKV_ASSIGN_OR_RETURN(Row row, bench_one(o, *engine, method, ctx, prefill_seconds));
      row.load_ms = load_ms;
      emit(row);
      continue;
    }
    for (const std::string& p : split(o.parallel, ',')) {
      int64_t n = 0;
      if (p == "max") {
        VLKV_ASSIGN_OR_RETURN(n, admitted_sequences(o, *engine, ctx + o.n_decode));
        if (n == 0) return out_of_memory("--parallel max: not one sequence of " + std::to_string(ctx + o.n_decode) +
                                         " tokens fits --kv-budget " + kv_budget_text(o.kv_budget));
      } else {
        char* end = nullptr;
        n = std::strtoll(p.c_str(), &end, 10);
        if (*end != '\0' || n <= 0 || n > 65536)
          return invalid_argument("--parallel: '" + p + "' is not a count in [1, 65536] or 'max'");
      }
      VLKV_ASSIGN_OR_RETURN(Row row, bench_parallel(o, *engine, method, ctx, n, prefill_seconds));
      row.load_ms = load_ms;
      emit(row);
    }
  }
  return Status::ok();
}

void print_row(const BenchOptions& o, const std::string& model, const Row& row) {
  if (o.json) {
    nlohmann::json j = {{"model", model},
                        {"method", row.method},
                        {"ctx", row.ctx},
                        {"fill", o.fill == Fill::kRandom ? "random" : "prefill"},
                        {"fill_s", row.fill_seconds},
                        {"load_ms", row.load_ms},
                        {"prefill_tokens", row.prefill_tokens},
                        {"prefill_tok_s", row.prefill_tok_s},
                        {"decode_tok_s", row.decode_tok_s},
                        {"kv_bytes_per_token", row.kv_bytes_per_token},
                        {"kv_held_bytes_per_token", row.kv_held_bytes_per_token},
                        {"weight_bytes", row.weight_bytes},
                        {"read_bandwidth_gb_s", o.read_gb_s},
                        {"roofline_pct", row.roofline_pct},
                        {"roofline_meaningful", row.roofline_meaningful},
                        {"bits_per_elem", row.bits_per_elem},
                        {"peak_rss_bytes", row.peak_rss},
                        {"max_seqs_in_budget", row.max_seqs},
                        {"parallel", row.parallel},
                        {"seq_decode_tok_s", row.seq_decode_tok_s},
                        {"decode_cpu_ms_per_token", row.decode_cpu_ms_per_token},
                        {"kv_stored_bytes_per_token", row.kv_stored_bytes_per_token},
                        {"n_decode", o.n_decode}};
    print_bench_json(std::move(j), o.engine, row.method, row.threads);
  } else {
    char roof[32] = "-";
    if (row.roofline_pct > 0)
      std::snprintf(roof, sizeof roof, row.roofline_meaningful ? "%.0f%%" : "(%.0f%%)", row.roofline_pct);
    if (!o.parallel.empty()) std::printf("%5lld ", static_cast<long long>(row.parallel));
    std::printf("%-24s %-*s %7lld %8s %8.0f %11.1f %10.2f %8.2f %10.0f %10.0f %9.2f %12.1f %9lld %9s\n", model.c_str(),
                o.method_width, row.method.c_str(), static_cast<long long>(row.ctx), o.fill == Fill::kRandom ? "random" : "prefill",
                row.load_ms, row.prefill_tok_s, row.decode_tok_s, row.decode_cpu_ms_per_token, row.kv_bytes_per_token,
                row.kv_held_bytes_per_token,
                row.bits_per_elem, row.peak_rss / 1048576.0, static_cast<long long>(row.max_seqs), roof);
  }
  std::fflush(stdout);
}

int bench(const BenchOptions& o_in) {
  BenchOptions o = o_in;
  Result<uint64_t> budget = parse_kv_budget_flag(o.kv_budget);
  if (!budget.is_ok()) return report_error(budget.status());
  o.engine.kv_budget_bytes = *budget;
  if (!o.media.images.empty() || !o.media.videos.empty()) {
    o.media.engine = o.engine;
    o.media.methods = split_kv_method_list(o.methods);
    o.media.repetitions = o.repetitions;
    o.media.json = o.json;
    return bench_media(o.media);
  }
  if (!o.engine.mmproj_path.empty())
    return report_error(invalid_argument("--mmproj: give the --image or --video to time (without them bench runs the "
                                         "text model alone)"));
  std::vector<int64_t> contexts;
  for (const std::string& c : split(o.contexts, ',')) {
    Result<int64_t> v = parse_count(c);
    if (!v.is_ok()) return report_error(v.status().with_context("--ctx"));
    contexts.push_back(*v);
  }
  const std::vector<std::string> methods = split_kv_method_list(o.methods);
  if (methods.empty() || contexts.empty()) return report_error(invalid_argument("no methods or contexts given"));
  for (const std::string& m : methods) {
    Status st = check_kv_method_flag(m);
    if (!st.is_ok()) return report_error(st);
  }
  for (const std::string& m : methods) o.method_width = std::max(o.method_width, static_cast<int>(m.size()));
  if (!o.no_bandwidth) o.read_gb_s = measure_read_gb_s(o.engine.n_threads);
  if (!o.json) {
    if (o.fill == Fill::kRandom)
      std::printf("# fill random: the cache brought to ctx tokens by storing random K/V rows through the method "
                  "(no model run); prefill: a real prefill of %lld random tokens (fewer if the model's context is "
                  "shorter) from an empty cache, apart from the depth; decode: %lld steps at depth ctx, one token "
                  "each\n",
                  static_cast<long long>(o.prefill_tokens), static_cast<long long>(o.n_decode));
    else
      std::printf("# fill prefill: the decoder over ctx random tokens in batches of %lld (real prefill, "
                  "full-precision attention), timed as prefill; decode: %lld steps after it, one token each\n",
                  static_cast<long long>(o.engine.n_batch), static_cast<long long>(o.n_decode));
    std::printf("# load ms: loading the model for the method (mapping, checks, the load-time repack of K-quant "
                "weights)\n");
    std::printf("# cpu ms/t: process CPU time (all threads) per generated token in the fastest decode loop (steadier "
                "than decode t/s on a shared machine)\n");
    std::printf("# KV B/tok: method's steady-state bytes per token; held B/tok: pool pages held / tokens (window, "
                "page tails included); max seqs: sequences of ctx+n tokens in --kv-budget %s\n", kv_budget_text(o.kv_budget).c_str());
    std::printf("# simd: %s (VLKV_SIMD caps it)\n", simd_tier_name(simd_tier()));
    if (o.read_gb_s > 0)
      std::printf("# roofline: (weight bytes + KV B/tok x depth) x decode tok/s / %.2f GB/s measured read bandwidth "
                  "(%d threads); in parentheses where it is not a bound: the bytes of a step fit 2x the %.0f MiB "
                  "last-level cache, or the figure exceeds 100%%\n",
                  o.read_gb_s, o.engine.n_threads > 0 ? o.engine.n_threads : static_cast<int>(std::thread::hardware_concurrency()),
                  last_level_cache_bytes() / 1048576.0);
    if (!o.parallel.empty()) std::printf("%5s ", "par");
    std::printf("%-24s %-*s %7s %8s %8s %11s %10s %8s %10s %10s %9s %12s %9s %9s\n", "model", o.method_width, "method", "ctx",
                "fill", "load ms", "prefill t/s", "decode t/s", "cpu ms/t", "KV B/tok", "held B/tok", "bits/elem", "peak RSS MiB", "max seqs", "roofline");
  }
  std::string model = o.engine.model_path;
  if (size_t slash = model.find_last_of('/'); slash != std::string::npos) model = model.substr(slash + 1);
  for (const std::string& m : methods) {
    Status st = bench_method(o, m, contexts, [&](const Row& row) { print_row(o, model, row); });
    if (!st.is_ok()) return report_error(st);
  }
  return kExitOk;
}

}  // namespace

void add_bench_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* app = root.add_subcommand("bench", "Measure prefill/decode speed and KV memory per method and context");
  add_param_flags(*app, o->engine, {"model"});
  app->get_option("--model")->required();
  app->add_option("--kv", o->methods, kv_method_help(true))->capture_default_str();
  app->add_option("--ctx", o->contexts, "Comma-separated depths (tokens in the cache before the decode steps), e.g. 128,1K,4K,32K")
      ->capture_default_str();
  app->add_option("--kv-budget", o->kv_budget, "KV budget used for max-seqs and allocation (" + kv_budget_auto_help() + ")")->capture_default_str();
  app->add_option("--fill", o->fill,
                  "How the cache reaches each --ctx depth: random (default; random K/V rows stored through the KV "
                  "method, no model run, so 8K-32K rows take seconds; prefill is then timed on --prefill-tokens) or "
                  "prefill (a real prefill of ctx tokens, timed as the prefill column)")
      ->transform(CLI::CheckedTransformer(std::map<std::string, Fill>{{"random", Fill::kRandom},
                                                                      {"prefill", Fill::kPrefill}}))
      ->default_str("random");
  app->add_option("--prefill-tokens", o->prefill_tokens,
                  "--fill random: prompt tokens of the timed prefill (from an empty cache; at most the model's "
                  "context minus the decode steps)")
      ->check(CLI::Range(1, 1 << 24))->capture_default_str();
  app->add_option("-n,--n-decode", o->n_decode, "Decode steps measured after the prefill")
      ->check(CLI::Range(0, 1 << 20))->capture_default_str();
  app->add_option("-r,--repetitions", o->repetitions, "Repetitions (best is reported)")
      ->check(CLI::Range(1, 100))->capture_default_str();
  add_param_flags(*app, o->engine, {"n_threads", "exact_matmul", "n_batch"});
  app->add_option("--parallel", o->parallel,
                  "Comma-separated counts of sequences decoding together (batched steps), or max: as many as "
                  "--kv-budget admits, e.g. 1,4,16,max; decode t/s is then the aggregate")
      ->capture_default_str();
  add_param_flags(*app, o->engine, {"mmproj", "max_frames", "max_image_pixels", "image_min_tokens", "image_max_tokens"});
  app->add_option("--image", o->media.images,
                  "With --mmproj: time one question about this image instead of the text rows (repeatable): "
                  "encode ms (vision encoder + projector), prefill t/s of the whole prompt, time to first token")
      ->check(CLI::ExistingFile);
  app->add_option("--video", o->media.videos, "With --mmproj: as --image, for a video (repeatable)")
      ->check(CLI::ExistingFile);
  add_video_sampling_flags(*app, o->media.frames, o->media.fps);
  app->add_option("-p,--prompt", o->media.prompt, "With --image/--video: the question's text")->capture_default_str();
  app->add_flag("--json", o->json, "One JSON object per line per (method, ctx, parallel), or per method with --image/--video");
  app->add_flag("--no-bandwidth", o->no_bandwidth, "Skip the read-bandwidth measurement (no roofline column)");
  auto hub = add_hub_flags(*app, o->engine.model_path, o->engine.mmproj_path);
  commands.push_back({app, run_after_hub_download(hub, [o, app] {
    o->contexts_given = app->count("--ctx") > 0;
    return bench(*o);
  })});
}

}  // namespace vlkv::cli
