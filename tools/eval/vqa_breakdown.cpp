#include "eval/vqa_breakdown.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "eval/report_format.h"

namespace vlkv::cli {
namespace {

std::string group_of(const VqaItem& it, const std::string& by) {
  return by == "n_frames" ? std::to_string(it.n_frames) : (it.type.empty() ? "-" : it.type);
}

// Groups in display order: numbers ascending, names alphabetically.
bool group_less(const std::string& a, const std::string& b) {
  const bool na = !a.empty() && std::isdigit(static_cast<unsigned char>(a[0]));
  const bool nb = !b.empty() && std::isdigit(static_cast<unsigned char>(b[0]));
  if (na && nb) return std::stoll(a) < std::stoll(b);
  return na != nb ? na : a < b;
}

std::vector<std::string> groups_in(const std::vector<VqaGroupRow>& rows, const std::string& by) {
  std::vector<std::string> g;
  for (const VqaGroupRow& r : rows)
    if (r.by == by && std::find(g.begin(), g.end(), r.group) == g.end()) g.push_back(r.group);
  std::sort(g.begin(), g.end(), group_less);
  return g;
}

std::vector<std::string> methods_in(const std::vector<VqaGroupRow>& rows) {
  std::vector<std::string> m;
  for (const VqaGroupRow& r : rows)
    if (std::find(m.begin(), m.end(), r.method) == m.end()) m.push_back(r.method);
  return m;
}

const VqaGroupRow* find_row(const std::vector<VqaGroupRow>& rows, const std::string& method, const std::string& by,
                            const std::string& group) {
  for (const VqaGroupRow& r : rows)
    if (r.method == method && r.by == by && r.group == group) return &r;
  return nullptr;
}

}  // namespace

std::vector<VqaGroupRow> vqa_group_rows(const std::string& method, const std::string& by,
                                        const std::vector<VqaItem>& items, const std::vector<VqaItemScore>& scores) {
  struct Sum {
    int64_t n = 0, correct = 0, positions = 0, top1 = 0, tokens = 0;
    double kl = 0, held = 0, f16 = 0, seconds = 0;
  };
  std::map<std::string, Sum> sums;
  for (size_t i = 0; i < items.size() && i < scores.size(); ++i) {
    Sum& s = sums[group_of(items[i], by)];
    const VqaItemScore& x = scores[i];
    ++s.n;
    s.correct += x.correct;
    s.positions += x.n_positions;
    s.top1 += x.top1;
    s.kl += x.kl_sum;
    s.held += x.held_bytes;
    s.f16 += x.f16_bytes;
    s.seconds += x.decode_seconds;
    s.tokens += x.decode_tokens;
  }
  std::vector<VqaGroupRow> rows;
  for (const auto& [group, s] : sums) {
    VqaGroupRow r;
    r.method = method;
    r.by = by;
    r.group = group;
    r.n_items = s.n;
    r.accuracy = static_cast<double>(s.correct) / static_cast<double>(s.n);
    r.kl_mean = s.positions ? s.kl / static_cast<double>(s.positions) : NAN;
    r.top1 = s.positions ? static_cast<double>(s.top1) / static_cast<double>(s.positions) : NAN;
    r.held_ratio = s.f16 > 0 ? s.held / s.f16 : NAN;
    r.held_bytes_mean = s.held / static_cast<double>(s.n);
    r.decode_tok_s = s.seconds > 0 ? static_cast<double>(s.tokens) / s.seconds : 0;
    rows.push_back(r);
  }
  std::sort(rows.begin(), rows.end(), [](const VqaGroupRow& a, const VqaGroupRow& b) { return group_less(a.group, b.group); });
  return rows;
}

std::string vqa_accuracy_matrix(const std::vector<VqaGroupRow>& rows, const std::string& by) {
  const std::vector<std::string> groups = groups_in(rows, by);
  std::ostringstream s;
  char b[96];
  std::snprintf(b, sizeof b, "%-34s", (by == "n_frames" ? "accuracy by frames (items)" : "accuracy by type (items)"));
  s << b;
  for (const std::string& g : groups) {
    const VqaGroupRow* any = nullptr;
    for (const VqaGroupRow& r : rows) any = (!any && r.by == by && r.group == g) ? &r : any;
    std::snprintf(b, sizeof b, " %16s", (g + " (" + std::to_string(any ? any->n_items : 0) + ")").c_str());
    s << b;
  }
  s << "\n";
  for (const std::string& m : methods_in(rows)) {
    std::snprintf(b, sizeof b, "%-34s", m.c_str());
    s << b;
    for (const std::string& g : groups) {
      const VqaGroupRow* r = find_row(rows, m, by, g);
      std::snprintf(b, sizeof b, " %16s", r ? fmt(100.0 * r->accuracy, "%.1f%%").c_str() : "-");
      s << b;
    }
    s << "\n";
  }
  return s.str();
}

std::string accuracy_vs_frames_svg(const std::vector<VqaGroupRow>& rows, const std::string& title) {
  const std::vector<std::string> groups = groups_in(rows, "n_frames");
  const double W = 760, H = 480, L = 70, R = 190, T = 50, B = 60;
  double lo = INFINITY, hi = -INFINITY;
  for (const std::string& g : groups) {
    lo = std::min(lo, std::log2(std::stod(g)));
    hi = std::max(hi, std::log2(std::stod(g)));
  }
  if (!(hi > lo)) hi = lo + 1;
  auto px = [&](double frames) { return L + (W - L - R) * (std::log2(frames) - lo) / (hi - lo); };
  auto py = [&](double acc) { return T + (H - T - B) * (1.0 - acc); };
  static const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                   "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#aec7e8"};
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << (L + W - R) / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"14\">" << xml_escape(title)
    << "</text>\n<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\"" << H - T - B
    << "\" fill=\"none\" stroke=\"black\"/>\n";
  for (int pct = 0; pct <= 100; pct += 20) {
    const double y = py(pct / 100.0);
    s << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << y << "\" y2=\"" << y << "\" stroke=\"#ddd\"/><text x=\""
      << L - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">" << pct << "%</text>\n";
  }
  for (const std::string& g : groups) {
    const double x = px(std::stod(g));
    s << "<line x1=\"" << x << "\" x2=\"" << x << "\" y1=\"" << T << "\" y2=\"" << H - B << "\" stroke=\"#eee\"/><text x=\""
      << x << "\" y=\"" << H - B + 16 << "\" text-anchor=\"middle\">" << xml_escape(g) << "</text>\n";
  }
  s << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 18 << "\" text-anchor=\"middle\">frames in the video "
    << "(log scale)</text>\n<text transform=\"translate(20," << (T + H - B) / 2
    << ") rotate(-90)\" text-anchor=\"middle\">exact-match accuracy</text>\n";
  const std::vector<std::string> methods = methods_in(rows);
  for (size_t mi = 0; mi < methods.size(); ++mi) {
    const char* colour = kColours[mi % (sizeof kColours / sizeof kColours[0])];
    std::ostringstream pts;
    for (const std::string& g : groups)
      if (const VqaGroupRow* r = find_row(rows, methods[mi], "n_frames", g))
        pts << px(std::stod(g)) << "," << py(r->accuracy) << " ";
    s << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.5\" points=\"" << pts.str() << "\"/>\n";
    const double ly = T + 14 + 16 * static_cast<double>(mi);
    s << "<line x1=\"" << W - R + 12 << "\" x2=\"" << W - R + 32 << "\" y1=\"" << ly - 4 << "\" y2=\"" << ly - 4
      << "\" stroke=\"" << colour << "\" stroke-width=\"2\"/><text x=\"" << W - R + 36 << "\" y=\"" << ly << "\">"
      << xml_escape(methods[mi]) << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

Status write_vqa_breakdown(const std::string& dir, const std::string& model, const std::vector<VqaGroupRow>& rows) {
  std::ofstream csv(dir + "/breakdown.csv");
  if (!csv) return invalid_argument("--out " + dir + ": cannot write breakdown.csv");
  csv << "model,method,by,group,n_items,accuracy,kl_mean,top1_agreement,kv_bytes_held_ratio,kv_bytes_held_mean,"
         "decode_tok_s\n";
  auto num = [](double x) { return std::isfinite(x) ? fmt(x, "%.6g") : std::string(); };
  for (const VqaGroupRow& r : rows)
    csv << csv_field(model) << "," << csv_field(r.method) << "," << r.by << "," << csv_field(r.group) << "," << r.n_items
        << "," << num(r.accuracy) << "," << num(r.kl_mean) << "," << num(r.top1) << "," << num(r.held_ratio) << ","
        << num(r.held_bytes_mean) << "," << num(r.decode_tok_s) << "\n";
  if (groups_in(rows, "n_frames").size() > 1) {
    std::ofstream svg(dir + "/accuracy_vs_frames.svg");
    if (!svg) return invalid_argument("--out " + dir + ": cannot write accuracy_vs_frames.svg");
    svg << accuracy_vs_frames_svg(rows, "vlkv eval: " + model + ", accuracy as the video grows");
  }
  return Status::ok();
}

std::string vqa_answer_table(const std::vector<VqaItem>& items, const std::vector<std::string>& methods,
                             const std::vector<std::vector<std::string>>& answers, size_t width) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    const VqaItem& it = items[i];
    out += "#" + std::to_string(i + 1) + (it.type.empty() ? "" : " " + it.type) +
           (it.n_frames > 1 ? ", " + std::to_string(it.n_frames) + " frames" : "") + ": " + it.question +
           "  (expected: " + it.answer + ")\n";
    std::string line = "   ";
    for (size_t m = 0; m < methods.size(); ++m) {
      const std::string& a = i < answers[m].size() ? answers[m][i] : std::string();
      const std::string cell = methods[m] + " " + (a.empty() ? "(none)" : a) + (a == it.answer ? " ok" : " x");
      if (line.size() > 3 && line.size() + 3 + cell.size() > width) {
        out += line + "\n";
        line = "   ";
      }
      line += (line.size() > 3 ? " | " : "") + cell;
    }
    out += line + "\n";
  }
  return out;
}

Status write_vqa_answers(const std::string& dir, const std::string& model, const std::vector<VqaItem>& items,
                         const std::vector<std::string>& methods, const std::vector<std::vector<std::string>>& answers) {
  std::ofstream csv(dir + "/answers.csv");
  if (!csv) return invalid_argument("--out " + dir + ": cannot write answers.csv");
  csv << "model,method,item,line,n_frames,type,question,expected,answer,correct\n";
  for (size_t m = 0; m < methods.size(); ++m)
    for (size_t i = 0; i < items.size() && i < answers[m].size(); ++i) {
      const VqaItem& it = items[i];
      csv << csv_field(model) << "," << csv_field(methods[m]) << "," << i << "," << it.line << "," << it.n_frames << ","
          << csv_field(it.type) << "," << csv_field(it.question) << "," << csv_field(it.answer) << ","
          << csv_field(answers[m][i]) << "," << (answers[m][i] == it.answer ? 1 : 0) << "\n";
    }
  return Status::ok();
}

}  // namespace vlkv::cli
