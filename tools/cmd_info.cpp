// `vlkv info MODEL.gguf`: architecture, hyperparameters, tokenizer, tensor table, total size.
#include <cinttypes>
#include <cstdio>
#include <map>
#include <type_traits>
#include <variant>
#include <memory>

#include "commands.h"
#include "gguf/gguf_reader.h"
#include "quant/weight_format.h"
#include "text/hparams.h"
#include "text/tokenizer.h"

namespace vlkv::cli {
namespace {

std::string human_bytes(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", b / double(1ull << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.2f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%" PRIu64 " B", b);
  return buf;
}

// A metadata value on one line: strings quoted and cut, arrays by count and first items.
std::string format_value(const GgufValue& v, int depth = 0) {
  constexpr size_t kMaxString = 60;
  constexpr size_t kMaxItems = 6;
  return std::visit(
      [&](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          std::string s = x.size() > kMaxString ? x.substr(0, kMaxString) + "..." : x;
          for (char& c : s) if (c == '\n') c = ' ';
          return "\"" + s + "\"";
        } else if constexpr (std::is_same_v<T, GgufValue::Array>) {
          std::string s = "[" + std::to_string(x.items.size()) + " " + gguf_value_type_name(x.element_type);
          if (depth > 0) return s + "]";
          s += ":";
          for (size_t i = 0; i < x.items.size() && i < kMaxItems; ++i) s += " " + format_value(x.items[i], depth + 1);
          return s + (x.items.size() > kMaxItems ? " ...]" : "]");
        } else if constexpr (std::is_same_v<T, bool>) {
          return x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%g", x);
          return buf;
        } else {
          return std::to_string(x);
        }
      },
      v.data);
}

int info(const std::string& path, bool all_metadata) {
  Result<std::unique_ptr<GgufFile>> file = GgufFile::open(path);
  if (!file.is_ok()) return report_error(file.status());
  const GgufFile& g = **file;
  std::printf("file:          %s\n", path.c_str());
  std::printf("gguf version:  %u, alignment %" PRIu64 ", %zu metadata keys, %zu tensors, %s\n", g.version(),
              g.alignment(), g.metadata().size(), g.tensors().size(), human_bytes(g.file_size()).c_str());
  Result<std::string> name = g.get_string("general.name");
  if (name.is_ok()) std::printf("name:          %s\n", name->c_str());

  Result<TextHparams> hp = read_text_hparams(g);
  if (hp.is_ok()) {
    const TextHparams& h = *hp;
    std::printf("architecture:  %s\n", h.arch_name.c_str());
    std::printf("  n_embd %" PRId64 ", n_layers %" PRId64 ", n_heads %" PRId64 ", n_kv_heads %" PRId64
                ", head_dim %" PRId64 ", n_ff %" PRId64 ", n_vocab %" PRId64 ", n_ctx_train %" PRId64 "\n",
                h.n_embd, h.n_layers, h.n_heads, h.n_kv_heads, h.head_dim, h.n_ff, h.n_vocab, h.n_ctx_train);
    std::printf("  rope: %s, n_rot %d, freq_base %g, freq_scale %g; rms_eps %g; output %s%s\n",
                h.rope.style == RopeStyle::kNeox ? "neox" : "normal", h.rope.n_rot, h.rope.freq_base,
                h.rope.freq_scale, h.rms_eps, h.tied_output ? "tied to token_embd" : "separate",
                h.qkv_bias ? "; q/k/v bias" : "");
  } else {
    Result<std::string> arch = g.get_string("general.architecture");
    std::printf("architecture:  %s (not runnable: %s)\n", arch.is_ok() ? arch->c_str() : "?",
                hp.status().message().c_str());
  }
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::from_gguf(g);
  if (tok.is_ok()) {
    std::printf("tokenizer:     %s, %d tokens, bos %d, eos %d\n", (*tok)->model_name().c_str(), (*tok)->n_vocab(),
                (*tok)->bos(), (*tok)->eos());
  } else {
    std::printf("tokenizer:     none (%s)\n", tok.status().message().c_str());
  }

  if (all_metadata) {
    std::printf("\nmetadata:\n");
    for (const auto& [key, value] : g.metadata()) {
      std::printf("  %-44s %-7s %s\n", key.c_str(), gguf_value_type_name(value.type), format_value(value).c_str());
    }
  }

  std::printf("\n%-40s %-8s %-24s %12s\n", "tensor", "type", "dims", "bytes");
  std::map<std::string, uint64_t> bytes_by_type;
  uint64_t total = 0;
  for (const GgufTensorInfo& t : g.tensors()) {
    std::string dims;
    for (size_t i = 0; i < t.dims.size(); ++i) dims += (i ? " x " : "") + std::to_string(t.dims[i]);
    std::printf("%-40s %-8s %-24s %12" PRIu64 "\n", t.name.c_str(), ggml_type_name(t.type), dims.c_str(), t.n_bytes);
    bytes_by_type[ggml_type_name(t.type)] += t.n_bytes;
    total += t.n_bytes;
  }
  std::printf("\ntotal tensor data: %s (%" PRIu64 " bytes)", human_bytes(total).c_str(), total);
  for (const auto& [type, b] : bytes_by_type) std::printf("; %s %s", type.c_str(), human_bytes(b).c_str());
  std::printf("\n");
  return kExitOk;
}

}  // namespace

void add_info_command(CLI::App& root, std::vector<Command>& commands) {
  auto path = std::make_shared<std::string>();
  auto all = std::make_shared<bool>(false);
  CLI::App* app = root.add_subcommand("info", "Print a GGUF model's architecture, tokenizer and tensors");
  app->add_option("model", *path, "GGUF file")->required();
  app->add_flag("--metadata", *all, "Also list every metadata key");
  commands.push_back({app, [path, all] { return info(*path, *all); }});
}

}  // namespace vlkv::cli
