#include "engine/visual_similarity.h"

namespace vlkv {

std::vector<double> mean_text_embedding(const PreparedPrompt& prompt, const WeightMatrix& token_embd,
                                        const std::function<bool(int32_t)>& is_text) {
  const int64_t n_embd = token_embd.n_cols;
  // Accumulated in double (a prompt may have thousands of text tokens).
  std::vector<double> mean(static_cast<size_t>(n_embd), 0.0);
  std::vector<float> row(static_cast<size_t>(n_embd));
  int64_t n_text = 0;
  for (const PromptChunk& c : prompt.chunks) {
    if (c.kind != PromptChunk::Kind::kText) continue;
    for (int32_t t : c.tokens) {
      if (t < 0 || t >= token_embd.n_rows || !is_text(t)) continue;
      get_row(token_embd, t, row.data());
      for (int64_t j = 0; j < n_embd; ++j) mean[static_cast<size_t>(j)] += row[static_cast<size_t>(j)];
      ++n_text;
    }
  }
  if (n_text == 0) return {};
  for (double& m : mean) m /= static_cast<double>(n_text);
  return mean;
}

std::vector<float> visual_similarity_of(const float* rows, int64_t n_tokens, int64_t stride,
                                        const std::vector<double>& mean_text) {
  const int64_t n_embd = static_cast<int64_t>(mean_text.size());
  std::vector<float> out;
  // A row may be wider than n_embd (deepstack parts after the input embedding): only the
  // input embedding is compared with the text.
  if (n_embd == 0 || stride < n_embd) return out;
  out.resize(static_cast<size_t>(n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* v = rows + t * stride;
    double dot = 0;
    for (int64_t j = 0; j < n_embd; ++j) dot += static_cast<double>(v[j]) * mean_text[static_cast<size_t>(j)];
    out[static_cast<size_t>(t)] = static_cast<float>(dot);
  }
  return out;
}

std::vector<std::vector<float>> visual_text_similarity(const PreparedPrompt& prompt, const WeightMatrix& token_embd,
                                                       const std::function<bool(int32_t)>& is_text) {
  std::vector<std::vector<float>> out(prompt.chunks.size());
  bool has_media = false;
  for (const PromptChunk& c : prompt.chunks) has_media |= c.kind == PromptChunk::Kind::kMedia;
  if (!has_media) return out;
  const std::vector<double> mean = mean_text_embedding(prompt, token_embd, is_text);
  if (mean.empty()) return out;
  for (size_t i = 0; i < prompt.chunks.size(); ++i) {
    const PromptChunk& c = prompt.chunks[i];
    if (c.kind != PromptChunk::Kind::kMedia || c.n_tokens <= 0 || c.embeddings.empty()) continue;
    const int64_t stride = static_cast<int64_t>(c.embeddings.size()) / c.n_tokens;
    if (stride * c.n_tokens != static_cast<int64_t>(c.embeddings.size())) continue;  // malformed: the layout refuses it
    out[i] = visual_similarity_of(c.embeddings.data(), c.n_tokens, stride, mean);
  }
  return out;
}

}  // namespace vlkv
