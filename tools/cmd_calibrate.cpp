// vlkv calibrate: the Q Cache calibration pass. Full-precision (f32 cache) prefill of the
// calibration prompts; per layer, the attention maps of a sample of each chunk's queries;
// Jensen–Shannon divergence between adjacent layers' maps (whole and visual keys only);
// layers grouped into lazy blocks under a threshold or a target lazy count; a small JSON
// map (kv/calibration.h) for --kv qcache_vla:map=FILE / qcache_gla:map=FILE.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "eval/vqa_items.h"
#include "kv/methods/qcache/calibration.h"
#include "kv/methods/qcache/calibration_collector.h"
#include "param_flags.h"
#include "vlkv/engine.h"

namespace vlkv::cli {
namespace {

struct CalibrateOptions {
  EngineParams engine;
  std::vector<std::string> images;
  std::string prompt = "Describe the image.";
  std::string vqa_path;
  int64_t vqa_n = 16;
  std::string text_path;
  std::string out_path;
  double threshold = -1;
  int64_t n_lazy = -1;
  std::string criterion = "auto";
  int queries = 16;
};

struct Calib {
  Prompt prompt;
  std::string label;
};

// The first n items of a VQA JSONL as calibration prompts (eval's reader: image, frames or
// video items; `answer` optional here).
Result<std::vector<Calib>> read_vqa_prompts(const Engine& e, const std::string& path, int64_t n,
                                            const MediaLimits& lim) {
  VLKV_ASSIGN_OR_RETURN(std::vector<VqaItem> items, read_vqa_items(path, n, /*answer_required=*/false));
  std::vector<Calib> out;
  for (VqaItem& it : items) {
    const std::string where = "--vqa " + path + ":" + std::to_string(it.line);
    Result<Prompt> p = vqa_item_prompt(e, it, lim);
    if (!p.is_ok()) return p.status().with_context(where);
    out.push_back({std::move(p).value(), where});
  }
  return out;
}

Status validate(const CalibrateOptions& o) {
  if (o.images.empty() && o.vqa_path.empty() && o.text_path.empty())
    return invalid_argument("give calibration inputs: --image FILE (with --mmproj), --vqa FILE.jsonl or --text FILE");
  if ((!o.images.empty() || !o.vqa_path.empty()) && o.engine.mmproj_path.empty())
    return invalid_argument("--image / --vqa need --mmproj (the vision model)");
  if (o.threshold >= 0 && o.n_lazy >= 0) return invalid_argument("give --threshold or --n-lazy, not both");
  if (o.criterion != "auto" && o.criterion != "visual" && o.criterion != "whole")
    return invalid_argument("--criterion '" + o.criterion + "': valid: auto, visual, whole");
  return Status::ok();
}

int calibrate(const CalibrateOptions& o) {
  if (Status st = validate(o); !st.is_ok()) return report_error(st);
  EngineParams ep = o.engine;
  ep.kv_method = "f32";  // the maps of the unmodified model
  Result<std::unique_ptr<Engine>> loaded = Engine::load(ep);
  if (!loaded.is_ok()) return report_error(loaded.status());
  Engine& e = **loaded;
  const ModelInfo& info = e.info();
  if (o.n_lazy >= info.n_layers)
    return report_error(invalid_argument("--n-lazy " + std::to_string(o.n_lazy) + ": the model has " +
                                         std::to_string(info.n_layers) + " layers (at most n_layers - 1 lazy)"));

  std::vector<Calib> inputs;
  for (const std::string& path : o.images) {
    Result<Image> im = load_image(path, ep.media_limits);
    if (!im.is_ok()) return report_error(im.status().with_context("--image " + path));
    Calib c;
    c.prompt = e.user_prompt(o.prompt, {MediaItem{{std::move(im).value()}, false}}, true);
    c.label = path;
    inputs.push_back(std::move(c));
  }
  if (!o.vqa_path.empty()) {
    Result<std::vector<Calib>> v = read_vqa_prompts(e, o.vqa_path, o.vqa_n, ep.media_limits);
    if (!v.is_ok()) return report_error(v.status());
    for (auto& c : *v) inputs.push_back(std::move(c));
  }
  if (!o.text_path.empty()) {
    std::ifstream f(o.text_path);
    if (!f) return report_error(not_found("--text " + o.text_path + ": cannot open"));
    std::stringstream ss;
    ss << f.rdbuf();
    Calib c;
    c.prompt.text = ss.str();
    c.label = o.text_path;
    if (c.prompt.text.empty()) return report_error(invalid_argument("--text " + o.text_path + ": empty"));
    inputs.push_back(std::move(c));
  }

  calibration::CollectorShape shape;
  shape.n_layers = static_cast<int>(info.n_layers);
  shape.n_heads = static_cast<int>(info.n_heads);
  shape.n_kv_heads = static_cast<int>(info.n_kv_heads);
  shape.head_dim = static_cast<int>(info.head_dim);
  shape.queries_per_chunk = o.queries;
  shape.scale = 0;  // from the first tap
  std::unique_ptr<calibration::AttentionMapCollector> col;
  for (const Calib& c : inputs) {
    Result<PreparedPrompt> p = e.prepare_prompt(c.prompt, /*add_bos=*/true);
    if (!p.is_ok()) return report_error(p.status().with_context(c.label));
    Result<std::unique_ptr<Session>> s = e.new_session();
    if (!s.is_ok()) return report_error(s.status());
    if (col) col->begin_prompt();
    (*s)->set_attention_observer([&](const AttentionTap& t) {
      if (!col) {
        shape.scale = t.scale;
        col = std::make_unique<calibration::AttentionMapCollector>(shape);
      }
      col->add(t.layer, t.n_tokens, t.q, t.k, reinterpret_cast<const TokenKind*>(t.kinds));
    });
    std::vector<float> logits;
    if (Status st = (*s)->eval_prompt(*p, &logits); !st.is_ok()) return report_error(st.with_context(c.label));
  }
  if (!col || info.n_layers < 2) return report_error(invalid_argument("nothing to calibrate (a model of one layer?)"));

  calibration::CalibrationMap map;
  map.model = {info.architecture, static_cast<int>(info.n_layers), static_cast<int>(info.n_heads),
               static_cast<int>(info.n_kv_heads), static_cast<int>(info.head_dim), info.fingerprint};
  map.jsd_adjacent = col->jsd_adjacent();
  if (col->saw_visual()) map.jsd_adjacent_visual = col->jsd_adjacent_visual();
  for (auto* t : {&map.jsd_adjacent, &map.jsd_adjacent_visual})
    for (double& x : *t)
      if (!std::isfinite(x)) x = 1.0;  // never sampled: never lazy
  map.criterion = o.criterion == "auto" ? (col->saw_visual() ? "visual" : "whole") : o.criterion;
  if (map.criterion == "visual" && !col->saw_visual())
    return report_error(invalid_argument("--criterion visual: the calibration inputs have no visual tokens"));
  map.n_prompts = static_cast<int64_t>(inputs.size());
  map.n_queries = col->n_queries();
  if (o.threshold >= 0) {
    map.threshold = o.threshold;
    map.grouping = calibration::group_by_threshold(map.criterion_jsd(), o.threshold);
  } else {
    const int k = o.n_lazy >= 0 ? static_cast<int>(o.n_lazy) : static_cast<int>(info.n_layers / 2);
    map.grouping = calibration::group_by_count(map.criterion_jsd(), k);
  }
  if (Status st = calibration::save_map(o.out_path, map); !st.is_ok()) return report_error(st);

  std::printf("calibrated %s on %lld prompt(s), %lld sampled queries; criterion %s\n", info.architecture.c_str(),
              static_cast<long long>(map.n_prompts), static_cast<long long>(map.n_queries), map.criterion.c_str());
  std::printf("%-8s %-12s %-12s\n", "layers", "jsd_whole", "jsd_visual");
  for (size_t l = 0; l < map.jsd_adjacent.size(); ++l)
    std::printf("%2zu-%-5zu %-12.5f %-12s\n", l, l + 1, map.jsd_adjacent[l],
                map.jsd_adjacent_visual.empty() ? "-" : std::to_string(map.jsd_adjacent_visual[l]).c_str());
  std::string lazy;
  for (int l : map.grouping.lazy_layers()) {
    if (!lazy.empty()) lazy += ' ';
    lazy += std::to_string(l);
  }
  std::printf("lazy layers (%d of %lld): %s\nwrote %s\n", map.grouping.n_lazy(), static_cast<long long>(info.n_layers),
              lazy.empty() ? "none" : lazy.c_str(), o.out_path.c_str());
  return kExitOk;
}

}  // namespace

void add_calibrate_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* app = root.add_subcommand(
      "calibrate", "Q Cache calibration: JS divergence of adjacent layers' attention maps on a full-precision "
                   "prefill, grouped into lazy blocks; writes the map for --kv qcache_vla:map=FILE");
  add_param_flags(*app, o->engine, {"model", "mmproj"});
  app->get_option("--model")->required();
  app->add_option("--image", o->images, "Calibration image (repeatable), asked --prompt");
  app->add_option("--prompt", o->prompt, "Question asked about each --image")->capture_default_str();
  app->add_option("--vqa", o->vqa_path, "VQA JSONL as vlkv eval --vqa reads it (image, frames or video, question; answer not needed), paths "
                                        "relative to the file");
  app->add_option("--n", o->vqa_n, "VQA items used")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app->add_option("--text", o->text_path, "A text file prefilled as one more calibration prompt");
  app->add_option("-o,--out", o->out_path, "Output map (JSON)")->required();
  app->add_option("--threshold", o->threshold, "Layers whose JSD to the previous layer is below this are lazy")
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--n-lazy", o->n_lazy, "Number of lazy layers (the lowest JSDs; default: half the layers)")
      ->check(CLI::Range(0, 1 << 20));
  app->add_option("--criterion", o->criterion, "JSD that groups: visual (visual keys only), whole, or auto "
                                               "(visual when the inputs have visual tokens)")
      ->capture_default_str();
  app->add_option("--queries", o->queries, "Sampled queries per prefill chunk")->check(CLI::Range(1, 4096))
      ->capture_default_str();
  add_param_flags(*app, o->engine, {"n_threads"});
  commands.push_back({app, [o] { return calibrate(*o); }});
}

}  // namespace vlkv::cli
