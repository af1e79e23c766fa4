// `vlkv eval`: fidelity of KV methods against the f16 cache, measured the same way
// for every method. Text: teacher forcing - a first chunk is prefilled, the rest is
// fed in small steps so that later tokens attend over the *compressed* cache of the
// earlier ones; per evaluated position KL(p_f16 || p_method), top-1 agreement and the
// perplexity of the true next tokens. VQA (JSONL {image, question, answer}): exact-
// match accuracy of each method's greedy answers, and KL / top-1 on the positions of
// the f16 cache's greedy answer (teacher-forced). One row per method: table, JSON
// lines, and with --out a CSV, a JSONL and an SVG plot (bits/elem vs KL).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "eval/report_format.h"
#include "eval/vqa_breakdown.h"
#include "eval/vqa_items.h"
#include "hub_flags.h"
#include "kv_flags.h"
#include "param_flags.h"
#include "vlkv/engine.h"

namespace vlkv::cli {
namespace {

constexpr const char* kMethodology =
    "Text: the text's tokens (BOS first, truncated to the context) are fed with teacher forcing: the first "
    "--prefill tokens in one prefill, then the rest --step tokens per decode step, so each later token attends "
    "over the compressed cache of all earlier steps (not the full-precision prefill attention). Evaluated "
    "positions are the decode-phase positions with a true next token. Per position: KL(p_f16 || p_method) of the "
    "next-token distributions (nats), top-1 agreement with the f16 cache, and the perplexity of the true next "
    "tokens. The reference is a separate run with the f16 cache; the f16 row is a second, independent run. "
    "VQA (--vqa items.jsonl, {image|frames|video, question, answer}, paths relative to the file): the prompt is "
    "the chat template around the item's `prompt` (one <__media__> per image or frame) or <media><question>; "
    "accuracy = exact match of the method's greedy answer (leading space stripped) with `answer`; KL and top-1 "
    "over the positions of the f16 cache's greedy answer, teacher-forced; decode tok/s over the greedy answers' "
    "steps. Items of several lengths (`n_frames`) or types (`type`) get an accuracy table per length and per "
    "type (--out: breakdown.csv, accuracy_vs_frames.svg, answers.csv; --answers prints each item's answers). "
    "bits/elem: the method's steady-state stored bits per K/V element incl. metadata; KV vs f16: bits/16 "
    "(steady state); KV@n vs f16: exact bytes at the evaluated length incl. full-precision windows.";

struct EvalOptions {
  EngineParams engine;
  std::string methods = "f16,int4,kivi2,vidkv";
  std::string text_path;
  std::string vqa_path;
  std::string out_dir;
  std::string kv_budget = kKvBudgetAuto;  // the one default rule: tools/kv_flags.h
  int64_t prefill = 64;
  int64_t step = 1;
  int64_t max_tokens = 0;   // text tokens evaluated (0: the model's context)
  int64_t vqa_limit = 0;    // items (0: all)
  bool show_answers = false;  // VQA: print every item's answer by every method
  int64_t max_answer = 64;  // greedy answer tokens (tinyvlm-shapes descriptions need up to ~40)
  bool json = false;
  // The reference run with exact f32 matmuls while the methods keep o.engine.exact_matmul: the
  // f16 row then shows what rounding activations to 8 bits (decode and block-format prefill) costs.
  bool reference_exact = false;
};

// Per-position reference: log-softmax rows of the f16 cache.
struct LogProbs {
  int64_t n_vocab = 0;
  std::vector<float> rows;  // [n_rows, n_vocab]
  int64_t n_rows() const { return n_vocab ? static_cast<int64_t>(rows.size()) / n_vocab : 0; }
  void add(const float* logits) {
    double mx = -INFINITY;
    for (int64_t i = 0; i < n_vocab; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
    double sum = 0;
    for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
    const double lse = mx + std::log(sum);
    for (int64_t i = 0; i < n_vocab; ++i) rows.push_back(static_cast<float>(logits[i] - lse));
  }
  const float* row(int64_t r) const { return rows.data() + r * n_vocab; }
};

int64_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) best = x[i] > x[best] ? i : best;
  return best;
}

// Sums over compared positions.
struct Fidelity {
  double kl_sum = 0, nll_sum = 0;
  int64_t n = 0, top1 = 0, n_nll = 0;
  // ref, m: log-softmax rows; target: the true next token or -1 (no perplexity term).
  void add(const float* ref, const float* m, int64_t n_vocab, int64_t target) {
    double kl = 0;
    for (int64_t i = 0; i < n_vocab; ++i) {
      const double lp = ref[i];
      if (lp > -80) kl += std::exp(lp) * (lp - static_cast<double>(m[i]));
    }
    kl_sum += std::max(kl, 0.0);
    top1 += argmax(ref, n_vocab) == argmax(m, n_vocab);
    ++n;
    if (target >= 0) {
      nll_sum -= m[target];
      ++n_nll;
    }
  }
};

struct Row {
  std::string method;
  std::string refused;  // non-empty: the method cannot run on this model (why)
  double bits_per_elem = 0, kv_bytes_ratio = 0, kv_bytes_at_n_ratio = 0;
  double kv_bytes_held_ratio = NAN;  // measured: bytes the sessions held / f16 bytes of their tokens
  double kl_mean = NAN, top1 = NAN, ppl = NAN, accuracy = NAN;
  double decode_tok_s = NAN;  // VQA: greedy answer tokens per second of decode steps
  int64_t n_positions = 0, n_items = 0;
  std::vector<VqaGroupRow> groups;  // VQA: per length and per question type
  std::vector<std::string> answers; // VQA: the greedy answer per item
};

struct TextCase {
  std::vector<int32_t> tokens;
};

struct VqaReference {
  std::vector<std::vector<int32_t>> answers;  // f16 greedy answer per item, EOG token included when reached
  std::vector<LogProbs> rows;                 // log-softmax rows at the answer positions
};

std::string read_file(const std::string& path, Status* st) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *st = not_found(path + ": cannot open");
    return {};
  }
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string default_text_path() {
  std::vector<std::string> candidates = {"tests/data/eval/story.txt"};
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    const std::filesystem::path dir = std::filesystem::path(exe).parent_path();
    candidates.push_back((dir / "../tests/data/eval/story.txt").string());
    candidates.push_back((dir / "../../tests/data/eval/story.txt").string());
  }
  for (const std::string& c : candidates)
    if (std::filesystem::is_regular_file(c)) return c;
  return {};
}

Result<std::unique_ptr<Engine>> load(const EvalOptions& o, const std::string& method, int64_t n_ctx,
                                     bool reference = false) {
  EngineParams ep = o.engine;
  ep.kv_method = method;
  ep.n_ctx = n_ctx;
  if (reference && o.reference_exact) ep.exact_matmul = true;
  return Engine::load(ep);
}

// What sessions really held at their end (Session::kv_stored_bytes) against an f16 cache of
// the same tokens: captures token kinds, per-sequence groupings and data-dependent mixes.
struct HeldBytes {
  double held = 0, f16 = 0;
  void add(const Session& s, const ModelInfo& m) {
    held += s.kv_stored_bytes();
    f16 += static_cast<double>(s.n_past()) * static_cast<double>(m.n_layers) * m.n_kv_heads * m.head_dim * 2 * 2;
  }
  double ratio() const { return f16 > 0 ? held / f16 : NAN; }
};

// ---- text: teacher-forced log-probs of one method over the evaluated positions ----
Status run_text(Engine& e, const EvalOptions& o, const std::vector<int32_t>& toks, LogProbs* out,
                HeldBytes* held = nullptr) {
  VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, e.new_session());
  out->n_vocab = s->n_vocab();
  out->rows.clear();
  const int64_t n = static_cast<int64_t>(toks.size());
  std::vector<float> logits;
  VLKV_RETURN_IF_ERROR(s->eval(std::vector<int32_t>(toks.begin(), toks.begin() + o.prefill), false, &logits));
  // Positions j in [prefill, n - 1): logits at j predict token j + 1.
  for (int64_t j = o.prefill; j < n - 1; j += o.step) {
    const int64_t m = std::min(o.step, n - 1 - j);
    VLKV_RETURN_IF_ERROR(s->eval(std::vector<int32_t>(toks.begin() + j, toks.begin() + j + m), true, &logits));
    for (int64_t r = 0; r < m; ++r) out->add(logits.data() + r * out->n_vocab);
  }
  if (held) held->add(*s, e.info());
  return Status::ok();
}

// ---- VQA ----
Result<PreparedPrompt> prepare_item(Engine& e, VqaItem& it, const MediaLimits& limits) {
  VLKV_ASSIGN_OR_RETURN(Prompt p, vqa_item_prompt(e, it, limits));
  return e.prepare_prompt(p, /*add_bos=*/true);
}

std::string answer_text(Engine& e, const std::vector<int32_t>& ids) {
  std::string t;
  for (int32_t id : ids)
    if (!e.is_end_of_generation(id)) t += e.token_to_piece(id);
  if (!t.empty() && t[0] == ' ') t.erase(0, 1);
  return t;
}

// Greedy answer (EOG included when reached) and, when `forced` is given, the rows
// at the positions of `forced` instead (teacher forcing): rows[i] predicts forced[i].
// score (optional): the held and f16 bytes at the end and the decode steps' time.
Status run_item(Engine& e, const PreparedPrompt& p, int64_t max_answer, const std::vector<int32_t>* forced,
                std::vector<int32_t>* answer, LogProbs* rows, HeldBytes* held = nullptr,
                VqaItemScore* score = nullptr) {
  VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, e.new_session());
  std::vector<float> logits;
  VLKV_RETURN_IF_ERROR(s->eval_prompt(p, &logits));
  rows->n_vocab = s->n_vocab();
  rows->rows.clear();
  answer->clear();
  const int64_t n = forced ? static_cast<int64_t>(forced->size()) : max_answer;
  for (int64_t i = 0; i < n; ++i) {
    rows->add(logits.data());
    const int32_t t = forced ? (*forced)[i] : static_cast<int32_t>(argmax(logits.data(), rows->n_vocab));
    answer->push_back(t);
    if (e.is_end_of_generation(t) || i + 1 == n) break;
    const auto t0 = std::chrono::steady_clock::now();
    VLKV_RETURN_IF_ERROR(s->eval({t}, false, &logits));
    if (score) {
      score->decode_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++score->decode_tokens;
    }
  }
  if (held) held->add(*s, e.info());
  if (score) {
    HeldBytes h;
    h.add(*s, e.info());
    score->held_bytes = h.held;
    score->f16_bytes = h.f16;
  }
  return Status::ok();
}

struct Inputs {
  std::vector<int32_t> text;           // text mode
  std::vector<VqaItem> items;          // VQA mode
  std::vector<PreparedPrompt> prompts; // VQA: prepared once (the vision encoder does not depend on the KV method)
};

Result<Row> eval_method(const EvalOptions& o, const std::string& method, const Inputs& in, const LogProbs* ref_text,
                        const VqaReference* ref_vqa, int64_t n_ctx) {
  Row row;
  row.method = method;
  Result<std::unique_ptr<Engine>> loaded = load(o, method, n_ctx);
  if (!loaded.is_ok()) {
    // A method that refuses this model (e.g. its head_dim) is reported in its row, not fatal.
    if (loaded.status().code() == StatusCode::kInvalidArgument || loaded.status().code() == StatusCode::kUnsupported) {
      row.refused = check_kv_load_error(loaded.status(), method).message();
      return row;
    }
    return loaded.status();
  }
  Engine& e = **loaded;
  // The evaluated length: the text's, or the longest VQA prompt's.
  int64_t n_tok = static_cast<int64_t>(in.text.size());
  for (const PreparedPrompt& p : in.prompts) n_tok = std::max(n_tok, p.n_tokens());
  // Exact bytes of n tokens (incl. staged windows, excl. page tails) and steady-state bits, from the method itself.
  VLKV_ASSIGN_OR_RETURN(row.bits_per_elem, e.kv_bits_per_element(""));
  VLKV_ASSIGN_OR_RETURN(const double bytes_at_n, e.kv_codec_bytes_for_tokens(n_tok));
  VLKV_ASSIGN_OR_RETURN(const double f16_bytes_at_n, e.kv_codec_bytes_for_tokens(n_tok, "f16"));
  row.kv_bytes_ratio = row.bits_per_elem / 16.0;
  row.kv_bytes_at_n_ratio = bytes_at_n / f16_bytes_at_n;
  Fidelity fid;
  HeldBytes held;
  if (ref_text) {
    LogProbs lp;
    VLKV_RETURN_IF_ERROR(run_text(e, o, in.text, &lp, &held));
    for (int64_t r = 0; r < lp.n_rows(); ++r)
      fid.add(ref_text->row(r), lp.row(r), lp.n_vocab, in.text[o.prefill + r + 1]);
    row.ppl = std::exp(fid.nll_sum / static_cast<double>(std::max<int64_t>(fid.n_nll, 1)));
  } else {
    int64_t correct = 0, decode_tokens = 0;
    double decode_seconds = 0;
    std::vector<VqaItemScore> scores(in.items.size());
    for (size_t i = 0; i < in.items.size(); ++i) {
      const std::vector<int32_t>& forced = ref_vqa->answers[i];
      std::vector<int32_t> ans;
      LogProbs lp;
      VqaItemScore& sc = scores[i];
      VLKV_RETURN_IF_ERROR(run_item(e, in.prompts[i], o.max_answer, &forced, &ans, &lp, &held, &sc));
      bool same_greedy = true;
      Fidelity item_fid;
      for (int64_t r = 0; r < lp.n_rows(); ++r) {
        fid.add(ref_vqa->rows[i].row(r), lp.row(r), lp.n_vocab, -1);
        item_fid.add(ref_vqa->rows[i].row(r), lp.row(r), lp.n_vocab, -1);
        same_greedy = same_greedy && argmax(lp.row(r), lp.n_vocab) == forced[r];
      }
      sc.kl_sum = item_fid.kl_sum;
      sc.n_positions = item_fid.n;
      sc.top1 = item_fid.top1;
      // The teacher-forced steps are the greedy answer when the method agrees at every one;
      // else the method's own greedy answer is decoded (and timed) apart.
      if (!same_greedy) {
        VqaItemScore greedy;
        VLKV_RETURN_IF_ERROR(run_item(e, in.prompts[i], o.max_answer, nullptr, &ans, &lp, nullptr, &greedy));
        sc.decode_seconds = greedy.decode_seconds;
        sc.decode_tokens = greedy.decode_tokens;
      }
      sc.answer = answer_text(e, ans);
      sc.correct = sc.answer == in.items[i].answer;
      row.answers.push_back(sc.answer);
      correct += sc.correct;
      decode_seconds += sc.decode_seconds;
      decode_tokens += sc.decode_tokens;
    }
    row.accuracy = static_cast<double>(correct) / static_cast<double>(in.items.size());
    row.n_items = static_cast<int64_t>(in.items.size());
    row.decode_tok_s = decode_seconds > 0 ? static_cast<double>(decode_tokens) / decode_seconds : NAN;
    for (const char* by : {"n_frames", "type"})
      for (VqaGroupRow& g : vqa_group_rows(method, by, in.items, scores)) row.groups.push_back(std::move(g));
  }
  row.kv_bytes_held_ratio = held.ratio();
  row.n_positions = fid.n;
  row.kl_mean = fid.kl_sum / static_cast<double>(std::max<int64_t>(fid.n, 1));
  row.top1 = static_cast<double>(fid.top1) / static_cast<double>(std::max<int64_t>(fid.n, 1));
  return row;
}

// ---- output ----
nlohmann::json num(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

nlohmann::json row_json(const Row& r, const std::string& model, double ppl_f16) {
  const bool ok = r.refused.empty();
  return {{"model", model},
          {"method", r.method},
          {"refused", ok ? nlohmann::json(nullptr) : nlohmann::json(r.refused)},
          {"bits_per_elem", ok ? num(r.bits_per_elem) : nullptr},
          {"kv_bytes_ratio", ok ? num(r.kv_bytes_ratio) : nullptr},
          {"kv_bytes_at_n_ratio", ok ? num(r.kv_bytes_at_n_ratio) : nullptr},
          {"kv_bytes_held_ratio", ok ? num(r.kv_bytes_held_ratio) : nullptr},
          {"kl_mean", num(r.kl_mean)},
          {"top1_agreement", num(r.top1)},
          {"ppl", num(r.ppl)},
          {"ppl_delta", std::isfinite(r.ppl) && std::isfinite(ppl_f16) ? num(r.ppl - ppl_f16) : nullptr},
          {"accuracy", num(r.accuracy)},
          {"decode_tok_s", num(r.decode_tok_s)},
          {"n_positions", r.n_positions},
          {"n_items", r.n_items}};
}

// Scatter plot, bits/elem (linear) vs mean KL (log10). KL = 0 (lossless) cannot sit on
// a log axis: those points are drawn hollow on the bottom edge, labelled "KL=0".
std::string plot_svg(const std::vector<Row>& rows, const std::string& title) {
  const double W = 720, H = 480, L = 80, R = 30, T = 50, B = 60;
  double xmax = 1, kmin = INFINITY, kmax = -INFINITY;
  for (const Row& r : rows) {
    if (!r.refused.empty() || !std::isfinite(r.kl_mean)) continue;
    xmax = std::max(xmax, r.bits_per_elem);
    if (r.kl_mean > 0) {
      kmin = std::min(kmin, r.kl_mean);
      kmax = std::max(kmax, r.kl_mean);
    }
  }
  if (!std::isfinite(kmin)) kmin = kmax = 1e-3;
  const double d0 = std::floor(std::log10(kmin)) - (kmin == kmax ? 1 : 0), d1 = std::ceil(std::log10(kmax)) + (kmin == kmax ? 1 : 0);
  const double d_hi = d1 > d0 ? d1 : d0 + 1;
  xmax = std::ceil(xmax * 1.1 / 2) * 2;
  auto px = [&](double b) { return L + (W - L - R) * b / xmax; };
  auto py = [&](double kl) { return T + (H - T - B) * (d_hi - std::log10(kl)) / (d_hi - d0); };
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"14\">" << xml_escape(title) << "</text>\n"
    << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\"" << H - T - B
    << "\" fill=\"none\" stroke=\"black\"/>\n";
  for (double d = d0; d <= d_hi + 1e-9; d += 1) {  // decades
    const double y = py(std::pow(10.0, d));
    s << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << y << "\" y2=\"" << y << "\" stroke=\"#ddd\"/>"
      << "<text x=\"" << L - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">1e" << static_cast<int>(d) << "</text>\n";
  }
  for (double b = 0; b <= xmax + 1e-9; b += 2) {
    const double x = px(b);
    s << "<line x1=\"" << x << "\" x2=\"" << x << "\" y1=\"" << T << "\" y2=\"" << H - B << "\" stroke=\"#eee\"/>"
      << "<text x=\"" << x << "\" y=\"" << H - B + 16 << "\" text-anchor=\"middle\">" << b << "</text>\n";
  }
  s << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 18 << "\" text-anchor=\"middle\">stored bits per K/V element "
    << "(incl. metadata)</text>\n"
    << "<text transform=\"translate(20," << (T + H - B) / 2 << ") rotate(-90)\" text-anchor=\"middle\">mean "
    << "KL(f16 cache || method), nats (log scale)</text>\n";
  for (const Row& r : rows) {
    if (!r.refused.empty() || !std::isfinite(r.kl_mean)) continue;
    const bool zero = r.kl_mean <= 0;
    const double x = px(r.bits_per_elem), y = zero ? H - B : py(r.kl_mean);
    s << "<circle cx=\"" << x << "\" cy=\"" << y << "\" r=\"4\" " << (zero ? "fill=\"white\" stroke=\"#1f77b4\"" : "fill=\"#1f77b4\"")
      << "/><text x=\"" << x + 6 << "\" y=\"" << y - 6 << "\">" << xml_escape(r.method) << (zero ? " (KL=0)" : "")
      << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

Status write_out(const std::string& dir, const std::vector<Row>& rows, const std::string& model, double ppl_f16,
                 const std::string& title) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return invalid_argument("--out " + dir + ": " + ec.message());
  std::ofstream csv(dir + "/results.csv"), jl(dir + "/results.jsonl"), svg(dir + "/plot.svg");
  if (!csv || !jl || !svg) return invalid_argument("--out " + dir + ": cannot write results");
  csv << "model,method,refused,bits_per_elem,kv_bytes_ratio,kv_bytes_at_n_ratio,kv_bytes_held_ratio,kl_mean,"
         "top1_agreement,ppl,ppl_delta,accuracy,n_positions,n_items,decode_tok_s\n";
  for (const Row& r : rows) {
    const nlohmann::json j = row_json(r, model, ppl_f16);
    jl << j.dump() << "\n";
    auto f = [&](const char* k) { return j[k].is_null() ? std::string() : j[k].dump(); };
    csv << csv_field(model) << "," << csv_field(r.method) << "," << csv_field(r.refused) << "," << f("bits_per_elem")
        << "," << f("kv_bytes_ratio") << "," << f("kv_bytes_at_n_ratio") << "," << f("kv_bytes_held_ratio") << ","
        << f("kl_mean") << ","
        << f("top1_agreement") << "," << f("ppl") << "," << f("ppl_delta") << "," << f("accuracy") << ","
        << r.n_positions << "," << r.n_items << "," << f("decode_tok_s") << "\n";
  }
  svg << plot_svg(rows, title);
  return Status::ok();
}

int eval(const EvalOptions& o_in) {
  EvalOptions o = o_in;
  if (!o.text_path.empty() && !o.vqa_path.empty()) return report_error(invalid_argument("give --text or --vqa, not both"));
  Result<uint64_t> budget = parse_kv_budget_flag(o.kv_budget);
  if (!budget.is_ok()) return report_error(budget.status());
  o.engine.kv_budget_bytes = *budget;
  const std::vector<std::string> methods = split_kv_method_list(o.methods);
  if (methods.empty()) return report_error(invalid_argument("--kv: no methods given"));
  for (const std::string& m : methods)
    if (Status st = check_kv_method_flag(m); !st.is_ok()) return report_error(st);
  if (!std::filesystem::is_regular_file(o.engine.model_path))
    return report_error(not_found("--model " + o.engine.model_path + ": no such file"));
  const bool vqa = !o.vqa_path.empty();
  if (vqa && o.engine.mmproj_path.empty()) return report_error(invalid_argument("--vqa needs --mmproj (the vision model)"));

  Inputs in;
  std::string text;
  if (vqa) {
    Result<std::vector<VqaItem>> items = read_vqa_items(o.vqa_path, o.vqa_limit);
    if (!items.is_ok()) return report_error(items.status().with_context("--vqa"));
    in.items = std::move(items).value();
  } else {
    if (o.text_path.empty()) o.text_path = default_text_path();
    if (o.text_path.empty())
      return report_error(not_found("--text: no file given and the bundled tests/data/eval/story.txt was not found"));
    Status st;
    text = read_file(o.text_path, &st);
    if (!st.is_ok()) return report_error(st.with_context("--text"));
  }

  // The reference: the f16 cache (exact matmuls with --reference-exact).
  Result<std::unique_ptr<Engine>> ref_engine = load(o, "f16", 0, /*reference=*/true);
  if (!ref_engine.is_ok()) return report_error(ref_engine.status());
  Engine& re = **ref_engine;
  if (Status st = check_kv_budget_for_model(*budget, o.kv_budget, re.info()); !st.is_ok()) return report_error(st);
  const int64_t n_ctx_model = re.info().n_ctx_train > 0 ? re.info().n_ctx_train : 4096;
  LogProbs ref_text;
  VqaReference ref_vqa;
  int64_t n_ctx = n_ctx_model;
  if (!vqa) {
    in.text = re.tokenize(text, /*add_special=*/true, /*parse_special=*/false);
    int64_t limit = o.max_tokens > 0 ? std::min(o.max_tokens, n_ctx_model) : n_ctx_model;
    if (static_cast<int64_t>(in.text.size()) > limit) in.text.resize(limit);
    if (static_cast<int64_t>(in.text.size()) < o.prefill + 2)
      return report_error(invalid_argument("--text " + o.text_path + ": " + std::to_string(in.text.size()) +
                                           " tokens; need at least --prefill + 2 = " + std::to_string(o.prefill + 2)));
    n_ctx = static_cast<int64_t>(in.text.size());
    // The reference engine was loaded with the model's context; the methods get n_ctx.
    if (Status st = run_text(re, o, in.text, &ref_text); !st.is_ok()) return report_error(st);
  } else {
    if (!re.has_vision()) return report_error(invalid_argument("--vqa: the model has no vision encoder"));
    for (VqaItem& it : in.items) {
      Result<PreparedPrompt> p = prepare_item(re, it, o.engine.media_limits);
      if (!p.is_ok())
        return report_error(p.status().with_context("--vqa " + o.vqa_path + ":" + std::to_string(it.line)));
      in.prompts.push_back(std::move(p).value());
      ref_vqa.answers.emplace_back();
      ref_vqa.rows.emplace_back();
      Status st = run_item(re, in.prompts.back(), o.max_answer, nullptr, &ref_vqa.answers.back(), &ref_vqa.rows.back());
      if (!st.is_ok()) return report_error(st);
    }
  }
  std::string model = o.engine.model_path;
  if (size_t slash = model.find_last_of('/'); slash != std::string::npos) model = model.substr(slash + 1);

  if (!o.json) {
    std::printf("# vlkv eval %s: %s\n", model.c_str(),
                vqa ? (std::to_string(in.items.size()) + " VQA items from " + o.vqa_path).c_str()
                    : (std::to_string(in.text.size()) + " tokens of " + o.text_path + ", prefill " +
                       std::to_string(o.prefill) + ", then " + std::to_string(o.step) + " token(s) per step; " +
                       std::to_string(in.text.size() - o.prefill - 1) + " positions evaluated").c_str());
    if (o.reference_exact)
      std::printf("# reference: f16 cache with exact f32 matmuls; the rows: %s\n",
                  o.engine.exact_matmul ? "exact too (--exact-matmul)" : "activations rounded to 8 bits");
    std::printf("# KL(f16 || method) in nats, mean over positions; top-1: agreement with the f16 cache; KV: bytes vs "
                "f16 in steady state and at the evaluated length (windows included), as the method reports them, "
                "and held: what the sessions really held at their end\n");
    std::printf("%-34s %9s %8s %9s %8s %11s %7s %9s %9s %8s %8s\n", "method", "bits/elem", "KV/f16", "KV@n/f16", "held",
                "KL mean", "top-1", "ppl", "dppl", "accuracy", "tok/s");
  }
  std::vector<Row> rows;
  double ppl_f16 = NAN;
  for (const std::string& m : methods) {
    Result<Row> r = eval_method(o, m, in, vqa ? nullptr : &ref_text, vqa ? &ref_vqa : nullptr, vqa ? 0 : n_ctx);
    if (!r.is_ok()) return report_error(r.status().with_context("method " + m));
    if (m == "f16" && std::isfinite(r->ppl)) ppl_f16 = r->ppl;
    rows.push_back(*r);
  }
  if (!std::isfinite(ppl_f16) && !vqa) {  // the reference's own perplexity
    Fidelity f;
    for (int64_t r = 0; r < ref_text.n_rows(); ++r) f.add(ref_text.row(r), ref_text.row(r), ref_text.n_vocab, in.text[o.prefill + r + 1]);
    ppl_f16 = std::exp(f.nll_sum / static_cast<double>(std::max<int64_t>(f.n_nll, 1)));
  }
  for (const Row& r : rows) {
    if (o.json) {
      std::printf("%s\n", row_json(r, model, ppl_f16).dump().c_str());
    } else if (!r.refused.empty()) {
      std::printf("%-34s refused: %s\n", r.method.c_str(), r.refused.c_str());
    } else {
      std::printf("%-34s %9.4f %8.4f %9.4f %8s %11s %7s %9s %9s %8s %8s\n", r.method.c_str(), r.bits_per_elem,
                  r.kv_bytes_ratio, r.kv_bytes_at_n_ratio, fmt(r.kv_bytes_held_ratio, "%.4f").c_str(),
                  fmt(r.kl_mean, "%.3e").c_str(), fmt(r.top1, "%.4f").c_str(),
                  fmt(r.ppl, "%.4g").c_str(), fmt(r.ppl - ppl_f16, "%+.3g").c_str(),
                  fmt(100.0 * r.accuracy, "%.1f%%").c_str(), fmt(r.decode_tok_s, "%.0f").c_str());
    }
  }
  std::vector<VqaGroupRow> groups;
  for (const Row& r : rows) groups.insert(groups.end(), r.groups.begin(), r.groups.end());
  if (vqa && !o.json) {
    bool typed = false;
    for (const VqaItem& it : in.items) typed = typed || !it.type.empty();
    if (vqa_items_vary_in_length(in.items)) std::printf("\n%s", vqa_accuracy_matrix(groups, "n_frames").c_str());
    if (typed) std::printf("\n%s", vqa_accuracy_matrix(groups, "type").c_str());
  }
  std::vector<std::string> answered_methods;
  std::vector<std::vector<std::string>> answers;
  for (const Row& r : rows)
    if (r.refused.empty()) {
      answered_methods.push_back(r.method);
      answers.push_back(r.answers);
    }
  if (vqa && o.show_answers && !o.json)
    std::printf("\nanswers\n%s", vqa_answer_table(in.items, answered_methods, answers).c_str());
  if (!o.out_dir.empty()) {
    const std::string title = "vlkv eval: " + model + (vqa ? " (VQA answers)" : " (teacher-forced text)");
    if (Status st = write_out(o.out_dir, rows, model, ppl_f16, title); !st.is_ok()) return report_error(st);
    if (vqa) {
      if (Status st = write_vqa_breakdown(o.out_dir, model, groups); !st.is_ok()) return report_error(st);
      if (Status st = write_vqa_answers(o.out_dir, model, in.items, answered_methods, answers); !st.is_ok())
        return report_error(st);
    }
  }
  return kExitOk;
}

}  // namespace

void add_eval_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* app = root.add_subcommand("eval", std::string("Fidelity of KV methods vs the f16 cache: KL, top-1, "
                                                          "perplexity, VQA accuracy, bits/elem.\n") + kMethodology);
  add_param_flags(*app, o->engine, {"model", "mmproj"});
  app->get_option("--model")->required();
  app->add_option("--kv", o->methods, kv_method_help(true))->capture_default_str();
  app->add_option("--text", o->text_path, "Text file evaluated with teacher forcing (default: the bundled "
                                          "tests/data/eval/story.txt)");
  app->add_option("--vqa", o->vqa_path, "VQA JSONL, one item per line: question, answer and image (a path), frames "
                                        "(paths, one <__media__> each in `prompt`) or video (a file, with n_frames or "
                                        "fps); optional prompt, type, n_frames. Paths relative to the file");
  app->add_flag("--json", o->json, "One JSON object per line per method (method, bits_per_elem, kv_bytes_ratio, "
                                   "kl_mean, top1_agreement, ppl, accuracy; null where not measured)");
  app->add_option("--out", o->out_dir, "Directory for results.csv, results.jsonl and plot.svg (bits/elem vs KL)");
  app->add_option("--prefill", o->prefill, "Text tokens prefilled before the evaluated decode steps")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app->add_option("--step", o->step, "Text tokens per decode step after the prefill")
      ->check(CLI::Range(1, 4096))->capture_default_str();
  app->add_option("-n,--max-tokens", o->max_tokens, "Text tokens evaluated (0: up to the model's context)")
      ->check(CLI::Range(0, 1 << 24))->capture_default_str();
  app->add_option("--vqa-limit", o->vqa_limit, "VQA items evaluated (0: all)")->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  app->add_flag("--answers", o->show_answers, "VQA: print each item's question, expected answer and every method's "
                                              "answer (--out writes them to answers.csv either way)");
  app->add_option("--max-answer", o->max_answer, "Greedy answer tokens per VQA item")->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app->add_option("--kv-budget", o->kv_budget, "KV cache memory budget per method (" + kv_budget_auto_help() + ")")->capture_default_str();
  add_param_flags(*app, o->engine, {"n_threads", "exact_matmul"});
  app->add_flag("--reference-exact", o->reference_exact,
                "Reference run with exact f32 matmuls (the methods keep --exact-matmul's setting): the f16 row "
                "then shows the cost of 8-bit activations on a block-format model");
  auto hub = add_hub_flags(*app, o->engine.model_path, o->engine.mmproj_path);
  commands.push_back({app, run_after_hub_download(hub, [o] { return eval(*o); })});
}

}  // namespace vlkv::cli
