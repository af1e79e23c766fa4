// `vlkv gen-model`: write a random-weight text GGUF (llama, qwen2, qwen2vl) or, with
// --mmproj PRESET, a vision projector of a real model's geometry (benchmarks, tests).
#include <cstdio>
#include <memory>

#include "commands.h"
#include "random_mmproj.h"
#include "random_model.h"
#include "weight_types.h"

namespace vlkv::cli {
namespace {

struct GenOptions {
  RandomModelSpec spec;
  std::string type = "q8_0";
  std::string out;
  std::string mmproj_preset;  // non-empty: write an mmproj instead of a text model
  int64_t n_embd_out = 0;     // the mmproj's output width (0: the preset's text model)
};

std::string mmproj_preset_help() {
  std::string h = "Write a random vision projector (mmproj) of a real geometry instead of a text model:";
  for (const MmprojPreset& p : mmproj_presets()) h += "\n  " + p.name + ": " + p.description;
  return h;
}

int gen_mmproj(const GenOptions& o) {
  const MmprojPreset* p = find_mmproj_preset(o.mmproj_preset);
  if (!p) {
    std::string known;
    for (const MmprojPreset& q : mmproj_presets()) known += (known.empty() ? "" : ", ") + q.name;
    return report_error(invalid_argument("--mmproj '" + o.mmproj_preset + "': no such preset (" + known + ")"));
  }
  Status st = write_random_mmproj(*p, o.n_embd_out, o.spec.seed, o.out);
  if (!st.is_ok()) return report_error(st);
  std::fprintf(stderr, "vlkv: wrote %s (%s)\n", o.out.c_str(), p->description.c_str());
  return kExitOk;
}

int gen(GenOptions o) {
  if (!o.mmproj_preset.empty()) return gen_mmproj(o);
  Result<WeightTypeChoice> type = parse_weight_type(o.type);
  if (!type.is_ok()) return report_error(type.status());
  o.spec.weight_type = type->type;
  o.spec.k_m_mix = type->k_m_mix;
  Status st = write_random_llama(o.spec, o.out);
  if (!st.is_ok()) return report_error(st);
  std::fprintf(stderr, "vlkv: wrote %s\n", o.out.c_str());
  return kExitOk;
}

}  // namespace

void add_gen_model_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<GenOptions>();
  CLI::App* app = root.add_subcommand("gen-model", "Write a random-weight GGUF (text model or mmproj) for benchmarks and tests");
  app->add_option("-o,--output", o->out, "Output GGUF path")->required();
  app->add_option("--type", o->type, std::string("Weight type: ") + weight_type_names() +
                                         " (K_M: llama.cpp's mixes, Q6_K output, attn_v, ffn_down)")
      ->capture_default_str();
  app->add_option("--arch", o->spec.arch, "Text architecture: llama, qwen2, qwen2vl")->capture_default_str();
  app->add_option("--mmproj", o->mmproj_preset, mmproj_preset_help());
  app->add_option("--n-embd-out", o->n_embd_out, "With --mmproj: projector output width (default: the preset's text model)");
  app->add_option("--n-embd", o->spec.n_embd)->capture_default_str();
  app->add_option("--n-layers", o->spec.n_layers)->capture_default_str();
  app->add_option("--n-heads", o->spec.n_heads)->capture_default_str();
  app->add_option("--n-kv-heads", o->spec.n_kv_heads)->capture_default_str();
  app->add_option("--head-dim", o->spec.head_dim)->capture_default_str();
  app->add_option("--n-ff", o->spec.n_ff)->capture_default_str();
  app->add_option("--n-vocab", o->spec.n_vocab)->capture_default_str();
  app->add_option("--ctx", o->spec.context_length)->capture_default_str();
  app->add_option("--seed", o->spec.seed)->capture_default_str();
  app->add_flag("--tied", o->spec.tied_output, "Tie the output matrix to the token embeddings");
  commands.push_back({app, [o] { return gen(*o); }});
}

}  // namespace vlkv::cli
