// `vlkv quantize`: a text model GGUF with its f32/f16/bf16 matrices rewritten in a block
// format (tools/model_quantizer.h), e.g. to run a checkpoint conversion with the 8-bit
// activation kernels, or to see what a format costs in `vlkv eval --reference-exact`.
#include <cstdio>
#include <map>
#include <memory>

#include "commands.h"
#include "gguf/ggml_type_info.h"
#include "model_quantizer.h"

namespace vlkv::cli {
namespace {

struct QuantizeOptions {
  std::string in;
  std::string out;
  std::string type = "q8_0";
  bool verbose = false;
};

int quantize(const QuantizeOptions& o) {
  Result<WeightTypeChoice> type = parse_weight_type(o.type);
  if (!type.is_ok()) return report_error(type.status().with_context("--type"));
  Result<QuantizeReport> r = quantize_model(o.in, o.out, *type);
  if (!r.is_ok()) return report_error(r.status());
  std::map<std::string, int> per_type;
  for (const QuantizedTensor& t : r->tensors) {
    ++per_type[ggml_type_info(t.to)->name];
    if (o.verbose || (!t.note.empty() && t.note != "already in a block format"))
      std::fprintf(stderr, "%-36s %-5s -> %-5s %s\n", t.name.c_str(), ggml_type_info(t.from)->name,
                   ggml_type_info(t.to)->name, t.note.c_str());
  }
  std::string mix;
  for (const auto& [name, n] : per_type) mix += (mix.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  std::fprintf(stderr, "vlkv: wrote %s: %zu tensors (%s), %.2f MiB -> %.2f MiB\n", o.out.c_str(), r->tensors.size(),
               mix.c_str(), r->bytes_in / 1048576.0, r->bytes_out / 1048576.0);
  return kExitOk;
}

}  // namespace

void add_quantize_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<QuantizeOptions>();
  CLI::App* app = root.add_subcommand("quantize", "Rewrite a text model GGUF's f32/f16/bf16 matrices in a block "
                                                  "format, as llama-quantize (norms and vectors kept)");
  app->add_option("input", o->in, "Text model GGUF")->required();
  app->add_option("output", o->out, "Output GGUF path")->required();
  app->add_option("--type", o->type, std::string("Weight type: ") + weight_type_names() +
                                         " (K_M: llama.cpp's mixes, Q6_K output, attn_v, ffn_down)")
      ->capture_default_str();
  app->add_flag("-v,--verbose", o->verbose, "One line per tensor");
  commands.push_back({app, [o] { return quantize(*o); }});
}

}  // namespace vlkv::cli
