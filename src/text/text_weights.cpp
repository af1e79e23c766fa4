#include "text/text_weights.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <tuple>

#include "base/check.h"
#include "base/thread_pool.h"
#include "quant/k_packed.h"
#include "quant/weight_format.h"

namespace vlkv {
namespace {

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "{";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "}";
}

// A 2-D matrix with ggml dims {n_cols, n_rows} in a weight format we implement.
Result<WeightMatrix> bind_matrix(const GgufFile& gguf, const std::string& name, int64_t n_cols, int64_t n_rows,
                                 uint64_t& total) {
  const GgufTensorInfo* t = gguf.find_tensor(name);
  if (!t) return invalid_file("missing tensor '" + name + "'");
  if (t->dims.size() != 2 || t->dims[0] != n_cols || t->dims[1] != n_rows) {
    return invalid_file("tensor '" + name + "' has dims " + dims_str(t->dims) + ", expected {" +
                        std::to_string(n_cols) + ", " + std::to_string(n_rows) + "}");
  }
  if (!find_weight_format(t->type)) {
    return unsupported("tensor '" + name + "' has weight type " + ggml_type_name(t->type) +
                       ", which vlkv does not implement (supported: f32, f16, bf16, q8_0, q4_0, q4_1, "
                       "q5_0, q5_1, q4_K, q5_K, q6_K)");
  }
  VLKV_ASSIGN_OR_RETURN(size_t rb, row_bytes(t->type, n_cols));
  if (rb * static_cast<uint64_t>(n_rows) != t->n_bytes) {
    return invalid_file("tensor '" + name + "' byte size does not match its shape");
  }
  total += t->n_bytes;
  return WeightMatrix{t->type, t->data, n_rows, n_cols, rb};
}

// A 1-D vector of n elements, dequantized to owned f32.
Result<std::vector<float>> bind_vector(const GgufFile& gguf, const std::string& name, int64_t n, uint64_t& total) {
  const GgufTensorInfo* t = gguf.find_tensor(name);
  if (!t) return invalid_file("missing tensor '" + name + "'");
  if (t->dims.size() != 1 || t->dims[0] != n) {
    return invalid_file("tensor '" + name + "' has dims " + dims_str(t->dims) + ", expected {" + std::to_string(n) +
                        "}");
  }
  const WeightFormat* f = find_weight_format(t->type);
  if (!f || n % f->block_elems != 0) {
    return unsupported("tensor '" + name + "' has unsupported type " + ggml_type_name(t->type));
  }
  std::vector<float> out(static_cast<size_t>(n));
  f->dequantize_row_ref(t->data, out.data(), n);
  total += t->n_bytes;
  return out;
}

bool packable(const WeightMatrix& m) {
  const WeightFormat* f = find_weight_format(m.type);
  return f && quant::can_pack_rows8(m.type, m.n_rows, m.n_cols) && quant::has_packed8_kernel(*f);
}

// The matrices ms repacked 8 rows at a time (quant/k_packed.h) into one arena owned by w, their
// file pages released. The arena asks for transparent huge pages: decode streams every weight
// once per token, and 2 MiB pages spare a TLB miss per 4 KiB (and the load a fault per 4 KiB:
// ~25 us each on a paravirtualized VM, 3 s for 0.5 GB). The pages are first touched (zeroed by
// the kernel, backed by the host) by the packing itself, in ~2 MiB slices spread over the pool:
// on a VM that returns freed memory to its host, that first touch is most of the load.
void pack_matrices(const GgufFile& gguf, const std::vector<WeightMatrix*>& ms, TextWeights& w, ThreadPool* pool) {
  constexpr size_t kAlign = size_t{2} << 20;
  struct Slice {
    const WeightMatrix* m;
    int64_t row, n_rows;
    uint8_t* dst;  // the matrix's place in the arena
  };
  std::vector<size_t> place;  // each matrix's offset in the arena (64-byte aligned)
  size_t total = 0;
  for (const WeightMatrix* m : ms) {
    place.push_back(total);
    total += (m->row_bytes * static_cast<size_t>(m->n_rows) + 63) / 64 * 64;
  }
  if (total == 0) return;
  const size_t alloc = (total + kAlign - 1) / kAlign * kAlign;
  std::shared_ptr<uint8_t[]> arena(static_cast<uint8_t*>(std::aligned_alloc(kAlign, alloc)), [](uint8_t* p) { std::free(p); });
  VLKV_CHECK_MSG(arena != nullptr, "out of memory for the packed weights");
#ifdef MADV_HUGEPAGE
  ::madvise(arena.get(), alloc, MADV_HUGEPAGE);  // a failure only leaves 4 KiB pages
#endif
  std::vector<Slice> slices;
  for (size_t i = 0; i < ms.size(); ++i) {
    const WeightMatrix* m = ms[i];
    // ~2 MiB per slice (whole groups of 8 rows): one huge page's zeroing per task
    const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(kAlign / m->row_bytes) / 8) * 8;
    for (int64_t r = 0; r < m->n_rows; r += rows)
      slices.push_back({m, r, std::min(rows, m->n_rows - r), arena.get() + place[i]});
  }
  const auto pack = [&slices, &gguf](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const Slice& s = slices[static_cast<size_t>(i)];
      const size_t off = static_cast<size_t>(s.row) * s.m->row_bytes, n = static_cast<size_t>(s.n_rows) * s.m->row_bytes;
      quant::pack_rows8(s.m->type, s.m->data + off, s.n_rows, s.m->row_bytes, s.dst + off);
      gguf.release(s.m->data + off, n);  // the whole pages inside the slice: the peak holds a few slices twice
    }
  };
  if (pool) {
    pool->parallel_for_chunked(static_cast<int64_t>(slices.size()), 1, pack);
  } else {
    pack(0, static_cast<int64_t>(slices.size()), 0);
  }
  for (size_t i = 0; i < ms.size(); ++i) {
    WeightMatrix* m = ms[i];
    gguf.release(m->data, m->row_bytes * static_cast<size_t>(m->n_rows));  // the pages two slices share
    m->data = arena.get() + place[i];
    m->packed_rows8 = true;
  }
  w.packed.push_back(std::move(arena));
  w.packed_bytes += total;
}

}  // namespace

Result<TextWeights> bind_text_weights(const GgufFile& gguf, const TextHparams& hp, bool round_activations_q8,
                                      bool pack_rows, ThreadPool* pool) {
  TextWeights w;
  uint64_t& total = w.total_bytes;
  const int64_t q_dim = hp.n_heads * hp.head_dim;
  const int64_t kv_dim = hp.n_kv_heads * hp.head_dim;
  VLKV_ASSIGN_OR_RETURN(w.token_embd, bind_matrix(gguf, "token_embd.weight", hp.n_embd, hp.n_vocab, total));
  VLKV_ASSIGN_OR_RETURN(w.output_norm, bind_vector(gguf, "output_norm.weight", hp.n_embd, total));
  if (hp.tied_output) {
    w.output = w.token_embd;
  } else {
    VLKV_ASSIGN_OR_RETURN(w.output, bind_matrix(gguf, "output.weight", hp.n_embd, hp.n_vocab, total));
  }
  w.layers.resize(static_cast<size_t>(hp.n_layers));
  for (int64_t i = 0; i < hp.n_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    VLKV_ASSIGN_OR_RETURN(l.attn_norm, bind_vector(gguf, p + "attn_norm.weight", hp.n_embd, total));
    VLKV_ASSIGN_OR_RETURN(l.wq, bind_matrix(gguf, p + "attn_q.weight", hp.n_embd, q_dim, total));
    VLKV_ASSIGN_OR_RETURN(l.wk, bind_matrix(gguf, p + "attn_k.weight", hp.n_embd, kv_dim, total));
    VLKV_ASSIGN_OR_RETURN(l.wv, bind_matrix(gguf, p + "attn_v.weight", hp.n_embd, kv_dim, total));
    VLKV_ASSIGN_OR_RETURN(l.wo, bind_matrix(gguf, p + "attn_output.weight", q_dim, hp.n_embd, total));
    if (hp.qkv_bias) {
      VLKV_ASSIGN_OR_RETURN(l.bq, bind_vector(gguf, p + "attn_q.bias", q_dim, total));
      VLKV_ASSIGN_OR_RETURN(l.bk, bind_vector(gguf, p + "attn_k.bias", kv_dim, total));
      VLKV_ASSIGN_OR_RETURN(l.bv, bind_vector(gguf, p + "attn_v.bias", kv_dim, total));
    } else if (hp.arch == TextArch::kQwen3Vl) {
      // llama.cpp's qwen3vl loader takes each q/k/v bias when the file has it.
      for (auto [bias, name, n] : {std::tuple{&l.bq, "attn_q.bias", q_dim}, std::tuple{&l.bk, "attn_k.bias", kv_dim},
                                   std::tuple{&l.bv, "attn_v.bias", kv_dim}}) {
        if (gguf.find_tensor(p + name)) {
          VLKV_ASSIGN_OR_RETURN(*bias, bind_vector(gguf, p + name, n, total));
        }
      }
    }
    if (gguf.find_tensor(p + "attn_qkv.weight")) {
      return unsupported("tensor '" + p + "attn_qkv.weight': fused QKV text weights are not supported");
    }
    if (hp.qk_norm) {
      VLKV_ASSIGN_OR_RETURN(l.q_norm, bind_vector(gguf, p + "attn_q_norm.weight", hp.head_dim, total));
      VLKV_ASSIGN_OR_RETURN(l.k_norm, bind_vector(gguf, p + "attn_k_norm.weight", hp.head_dim, total));
    }
    VLKV_ASSIGN_OR_RETURN(l.ffn_norm, bind_vector(gguf, p + "ffn_norm.weight", hp.n_embd, total));
    VLKV_ASSIGN_OR_RETURN(l.w_gate, bind_matrix(gguf, p + "ffn_gate.weight", hp.n_embd, hp.n_ff, total));
    VLKV_ASSIGN_OR_RETURN(l.w_up, bind_matrix(gguf, p + "ffn_up.weight", hp.n_embd, hp.n_ff, total));
    VLKV_ASSIGN_OR_RETURN(l.w_down, bind_matrix(gguf, p + "ffn_down.weight", hp.n_ff, hp.n_embd, total));
    if (hp.post_norms) {
      VLKV_ASSIGN_OR_RETURN(l.attn_post_norm, bind_vector(gguf, p + "post_attention_norm.weight", hp.n_embd, total));
      VLKV_ASSIGN_OR_RETURN(l.ffn_post_norm, bind_vector(gguf, p + "post_ffw_norm.weight", hp.n_embd, total));
    }
  }
  if (round_activations_q8) {
    w.output.round_activations_q8 = true;
    for (LayerWeights& l : w.layers) {
      for (WeightMatrix* m : l.matrices()) m->round_activations_q8 = true;
    }
  }
  if (round_activations_q8 && pack_rows) {
    std::vector<WeightMatrix*> ms;  // in the order decode reads them
    for (LayerWeights& l : w.layers)
      for (WeightMatrix* m : l.matrices())
        if (packable(*m)) ms.push_back(m);
    if (!hp.tied_output && packable(w.output)) ms.push_back(&w.output);  // tied: token_embd's rows are looked up
    pack_matrices(gguf, ms, w, pool);
  }
  return w;
}

}  // namespace vlkv
