#include "server/slot_table.h"

#include <algorithm>

namespace vlkv::server {

using nlohmann::json;

std::shared_ptr<SlotTable::Entry> SlotTable::add(std::string request_id, json params, int64_t max_tokens,
                                                 std::string tenant) {
  auto e = std::make_shared<Entry>();
  e->request_id = std::move(request_id);
  e->tenant = std::move(tenant);
  e->params = std::move(params);
  e->max_tokens = max_tokens;
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.push_back(e);
  return e;
}

void SlotTable::forget(const std::shared_ptr<Entry>& entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.remove(entry);
}

json SlotTable::to_json(int n_slots, int64_t running, int64_t n_ctx, const std::string* only_tenant) const {
  std::lock_guard<std::mutex> lock(mutex_);
  json slots = json::array();
  auto it = entries_.begin();
  for (int i = 0; i < n_slots; ++i) {
    const Entry* own = i < running && it != entries_.end() ? (it++)->get() : nullptr;
    if (own && only_tenant && own->tenant != *only_tenant) own = nullptr;
    const bool busy = own != nullptr;
    json s = {{"id", i}, {"n_ctx", n_ctx}, {"speculative", false}, {"is_processing", busy}, {"state", busy ? 1 : 0}};
    if (busy) {
      const Entry& e = *own;
      const int64_t n = e.n_decoded.load();
      s["id_task"] = e.request_id;
      s["params"] = e.params;
      s["next_token"] = json::array(
          {{{"has_next_token", true}, {"n_remain", std::max<int64_t>(0, e.max_tokens - n)}, {"n_decoded", n}}});
    } else {
      s["id_task"] = -1;
      s["params"] = json::object();
      s["next_token"] = json::array({{{"has_next_token", false}, {"n_remain", 0}, {"n_decoded", 0}}});
    }
    slots.push_back(std::move(s));
  }
  return slots;
}

}  // namespace vlkv::server
