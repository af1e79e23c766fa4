#include "engine/visual_similarity.h"

namespace vlkv {

std::vector<std::vector<float>> visual_text_similarity(const PreparedPrompt& prompt, const WeightMatrix& token_embd,
                                                       const std::function<bool(int32_t)>& is_text) {
  std::vector<std::vector<float>> out(prompt.chunks.size());
  const int64_t n_embd = token_embd.n_cols;
  // Mean text embedding, accumulated in double (a prompt may have thousands of text tokens).
  std::vector<double> mean(static_cast<size_t>(n_embd), 0.0);
  std::vector<float> row(static_cast<size_t>(n_embd));
  int64_t n_text = 0;
  bool has_media = false;
  for (const PromptChunk& c : prompt.chunks) {
    has_media |= c.kind == PromptChunk::Kind::kMedia;
    if (c.kind != PromptChunk::Kind::kText) continue;
    for (int32_t t : c.tokens) {
      if (t < 0 || t >= token_embd.n_rows || !is_text(t)) continue;
      get_row(token_embd, t, row.data());
      for (int64_t j = 0; j < n_embd; ++j) mean[static_cast<size_t>(j)] += row[static_cast<size_t>(j)];
      ++n_text;
    }
  }
  if (!has_media || n_text == 0) return out;
  for (double& m : mean) m /= static_cast<double>(n_text);
  for (size_t i = 0; i < prompt.chunks.size(); ++i) {
    const PromptChunk& c = prompt.chunks[i];
    if (c.kind != PromptChunk::Kind::kMedia || c.n_tokens <= 0) continue;
    // A row may be wider than n_embd (deepstack parts after the input embedding): only the
    // input embedding is compared with the text.
    const int64_t stride = static_cast<int64_t>(c.embeddings.size()) / c.n_tokens;
    if (stride < n_embd || stride * c.n_tokens != static_cast<int64_t>(c.embeddings.size()))
      continue;  // malformed: eval_chunk refuses it
    out[i].resize(static_cast<size_t>(c.n_tokens));
    for (int64_t t = 0; t < c.n_tokens; ++t) {
      const float* v = c.embeddings.data() + t * stride;
      double dot = 0;
      for (int64_t j = 0; j < n_embd; ++j) dot += static_cast<double>(v[j]) * mean[static_cast<size_t>(j)];
      out[i][static_cast<size_t>(t)] = static_cast<float>(dot);
    }
  }
  return out;
}

}  // namespace vlkv
