#include "server/token_mask.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace vlkv::server {

std::shared_ptr<const TokenTable> TokenTable::build(const Engine& model) {
  auto t = std::make_shared<TokenTable>();
  const int32_t n_vocab = static_cast<int32_t>(model.info().n_vocab);
  t->pieces.resize(n_vocab);
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (model.is_end_of_generation(id)) {
      t->end_of_generation.push_back(id);
      continue;
    }
    t->pieces[id] = model.token_to_piece(id);
    if (t->pieces[id].empty()) continue;
    t->order.push_back(id);
    t->max_piece = std::max(t->max_piece, t->pieces[id].size());
  }
  std::sort(t->order.begin(), t->order.end(), [&](int32_t a, int32_t b) {
    return t->pieces[a] != t->pieces[b] ? t->pieces[a] < t->pieces[b] : a < b;
  });
  t->common.resize(t->order.size());
  for (size_t i = 1; i < t->order.size(); ++i) {
    const std::string& a = t->pieces[t->order[i - 1]];
    const std::string& b = t->pieces[t->order[i]];
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    t->common[i] = static_cast<uint32_t>(n);
  }
  return t;
}

std::shared_ptr<const TokenTable> token_table_for(const Engine& model) {
  static std::mutex mutex;
  static std::map<const Engine*, std::shared_ptr<const TokenTable>> tables;
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<const TokenTable>& t = tables[&model];
  if (!t) t = TokenTable::build(model);
  return t;
}

void allowed_tokens(const TokenTable& table, const JsonRecognizer& state, std::vector<JsonRecognizer>& scratch,
                    std::vector<uint8_t>* allowed) {
  allowed->assign(table.pieces.size(), 0);
  if (scratch.size() < table.max_piece + 1) scratch.assign(table.max_piece + 1, state);
  scratch[0] = state;
  // scratch[k]: the state after the first k bytes of the previous token, valid for k <= good.
  size_t good = 0;
  for (size_t i = 0; i < table.order.size(); ++i) {
    const int32_t id = table.order[i];
    const std::string& p = table.pieces[id];
    size_t k = std::min<size_t>(good, table.common[i]);
    bool ok = true;
    for (; k < p.size(); ++k) {
      scratch[k + 1] = scratch[k];
      if (!scratch[k + 1].feed(static_cast<uint8_t>(p[k]))) {
        ok = false;
        break;
      }
    }
    good = k;
    if (ok) (*allowed)[id] = 1;
  }
}

}  // namespace vlkv::server
