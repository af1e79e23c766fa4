#include "model_quantizer.h"

#include <filesystem>
#include <vector>

#include "gguf/ggml_type_info.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "quant/weight_format.h"
#include "random_tensor.h"

namespace vlkv {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_float_type(GgmlType t) { return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16; }

// blk.N. -> N; -1 for a tensor outside the layers.
int64_t layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return -1;
  try {
    return std::stoll(name.substr(4, dot - 4));
  } catch (...) {
    return -1;
  }
}

// What one tensor becomes, as llama-quantize chooses it for a llama-family text model.
QuantizedTensor plan_tensor(const GgufTensorInfo& t, const WeightTypeChoice& choice, int64_t n_layers) {
  QuantizedTensor q{t.name, t.type, t.type, ""};
  if (t.dims.size() < 2 || !ends_with(t.name, ".weight")) return q;  // norms, biases, vectors
  if (!is_float_type(t.type)) {
    q.note = "already in a block format";
    return q;
  }
  GgmlType want = choice.type;
  if (choice.k_m_mix) {
    const int64_t layer = layer_of(t.name);
    const bool more = t.name == "output.weight" ||
                      ((ends_with(t.name, ".attn_v.weight") || ends_with(t.name, ".ffn_down.weight")) && layer >= 0 &&
                       k_m_more_bits(layer, n_layers));
    if (more) want = GgmlType::kQ6_K;
  }
  const int64_t row = t.dims[0];
  if (row % ggml_type_info(want)->block_elems != 0) {
    GgmlType fallback = want;
    if (want == GgmlType::kQ4_K) fallback = GgmlType::kQ5_0;
    if (want == GgmlType::kQ5_K) fallback = GgmlType::kQ5_1;
    if (want == GgmlType::kQ6_K) fallback = GgmlType::kQ8_0;
    const std::string len = "row length " + std::to_string(row) + " is not a multiple of " +
                            std::to_string(ggml_type_info(want)->block_elems);
    if (fallback != want && row % ggml_type_info(fallback)->block_elems == 0) {
      q.to = fallback;
      q.note = len + ": " + ggml_type_info(fallback)->name;
    } else {
      q.note = len + ": kept";
    }
    return q;
  }
  q.to = want;
  return q;
}

// Streams one tensor's rows: the source row widened to f32, encoded as `to`.
GgufWriter::TensorFill requantize_rows(const GgufTensorInfo& t, GgmlType to) {
  return [&t, to](uint8_t* dst, size_t n_bytes) -> Status {
    const WeightFormat* from = find_weight_format(t.type);
    if (!from) return unsupported(std::string("no reader for weight type ") + ggml_type_info(t.type)->name);
    const int64_t row = t.dims[0];
    const int64_t n_rows = t.n_elements() / row;
    VLKV_ASSIGN_OR_RETURN(const size_t in_row, row_bytes(t.type, row));
    VLKV_ASSIGN_OR_RETURN(const size_t out_row, row_bytes(to, row));
    if (out_row * static_cast<size_t>(n_rows) != n_bytes) return invalid_file("quantize: " + t.name + ": its size does not match its dims");
    std::vector<float> f(static_cast<size_t>(row));
    for (int64_t r = 0; r < n_rows; ++r) {
      from->dequantize_row_ref(t.data + static_cast<size_t>(r) * in_row, f.data(), row);
      VLKV_RETURN_IF_ERROR(encode_row(to, f.data(), row, dst + static_cast<size_t>(r) * out_row));
    }
    return Status::ok();
  };
}

}  // namespace

Result<QuantizeReport> quantize_model(const std::string& in_path, const std::string& out_path,
                                      const WeightTypeChoice& choice) {
  std::error_code ec;
  if (std::filesystem::exists(out_path, ec) && std::filesystem::equivalent(in_path, out_path, ec))
    return invalid_argument("quantize: the output " + out_path + " is the input file");
  VLKV_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::open(in_path));
  const GgufFile& g = *file;
  Result<std::string> arch = g.get_string("general.architecture");
  if (!arch.is_ok()) return invalid_argument("quantize: " + in_path + " has no general.architecture");
  if (*arch == "clip")
    return unsupported("quantize: " + in_path + " is a vision projector (mmproj); its encoder reads f16/f32 "
                       "weights: quantize the text model only");
  Result<int64_t> n_layers = g.get_i64(*arch + ".block_count");
  if (!n_layers.is_ok()) return invalid_argument("quantize: " + in_path + " has no " + *arch + ".block_count");

  GgufWriter w;
  for (const auto& [key, value] : g.metadata()) w.set(key, value);
  const int64_t ftype = llama_file_type(choice);
  if (ftype >= 0) w.set_u32("general.file_type", static_cast<uint32_t>(ftype));

  QuantizeReport report;
  bool any_block = false;
  for (const GgufTensorInfo& t : g.tensors()) {
    QuantizedTensor q = plan_tensor(t, choice, *n_layers);
    report.bytes_in += t.n_bytes;
    if (q.to == t.type) {
      VLKV_RETURN_IF_ERROR(w.add_tensor(t.name, t.type, t.dims, t.data, t.n_bytes));
      report.bytes_out += t.n_bytes;
    } else {
      VLKV_ASSIGN_OR_RETURN(const uint64_t n_out, ggml_tensor_bytes(q.to, t.dims));
      VLKV_RETURN_IF_ERROR(w.add_tensor(t.name, q.to, t.dims, requantize_rows(t, q.to)));
      report.bytes_out += n_out;
    }
    any_block = any_block || ggml_type_info(q.to)->block_elems > 1;
    report.tensors.push_back(std::move(q));
  }
  if (any_block) w.set_u32("general.quantization_version", 2);
  VLKV_RETURN_IF_ERROR(w.write_to_file(out_path));
  return report;
}

}  // namespace vlkv
