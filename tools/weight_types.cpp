#include "weight_types.h"

#include <utility>

namespace vlkv {

const char* weight_type_names() { return "f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k q4_k_m q5_k_m"; }

Result<WeightTypeChoice> parse_weight_type(const std::string& name) {
  static const std::pair<const char*, GgmlType> kTypes[] = {
      {"f32", GgmlType::kF32},   {"f16", GgmlType::kF16},   {"bf16", GgmlType::kBF16}, {"q8_0", GgmlType::kQ8_0},
      {"q4_0", GgmlType::kQ4_0}, {"q4_1", GgmlType::kQ4_1}, {"q5_0", GgmlType::kQ5_0}, {"q5_1", GgmlType::kQ5_1},
      {"q4_k", GgmlType::kQ4_K}, {"q5_k", GgmlType::kQ5_K}, {"q6_k", GgmlType::kQ6_K}};
  if (name == "q4_k_m") return WeightTypeChoice{GgmlType::kQ4_K, true};
  if (name == "q5_k_m") return WeightTypeChoice{GgmlType::kQ5_K, true};
  for (const auto& [n, t] : kTypes)
    if (name == n) return WeightTypeChoice{t, false};
  return invalid_argument("unknown weight type '" + name + "' (known: " + weight_type_names() + ")");
}

int64_t llama_file_type(const WeightTypeChoice& choice) {
  if (choice.k_m_mix) return choice.type == GgmlType::kQ4_K ? 15 : 17;  // Q4_K_M, Q5_K_M
  switch (choice.type) {
    case GgmlType::kF32: return 0;
    case GgmlType::kF16: return 1;
    case GgmlType::kQ4_0: return 2;
    case GgmlType::kQ4_1: return 3;
    case GgmlType::kQ8_0: return 7;
    case GgmlType::kQ5_0: return 8;
    case GgmlType::kQ5_1: return 9;
    case GgmlType::kQ2_K: return 10;
    case GgmlType::kQ3_K: return 11;   // Q3_K_S
    case GgmlType::kQ4_K: return 14;   // Q4_K_S
    case GgmlType::kQ5_K: return 16;   // Q5_K_S
    case GgmlType::kQ6_K: return 18;
    case GgmlType::kBF16: return 32;
    default: return -1;
  }
}

bool k_m_more_bits(int64_t layer, int64_t n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

}  // namespace vlkv
