// GET /slots as llama-server has it: one entry per slot (-np) with is_processing, n_ctx,
// the request's parameters and its tokens generated so far. The server's view of which
// requests hold a slot: of the requests submitted and not yet done, the oldest `running`
// (BackendLoad::running) ones - both backends start requests in submission order (the
// batched one may hold a later one back for KV memory; then the view is approximate).
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace vlkv::server {

class SlotTable {
 public:
  struct Entry {
    std::string request_id;
    std::string tenant;     // whose request (tenants.h): only its tenant sees its params
    nlohmann::json params;  // llama-server's slot "params" (n_predict, sampling, stop, ...)
    int64_t max_tokens = 0;
    std::atomic<int64_t> n_decoded{0};
  };

  // A submitted request; forget it (idempotent) when it is done.
  std::shared_ptr<Entry> add(std::string request_id, nlohmann::json params, int64_t max_tokens,
                             std::string tenant = "");
  void forget(const std::shared_ptr<Entry>& entry);

  // The /slots array: n_slots entries, the first `running` requests processing in them.
  // only_tenant: another tenant's request shows as an idle slot (no id, seed, stop strings).
  nlohmann::json to_json(int n_slots, int64_t running, int64_t n_ctx, const std::string* only_tenant = nullptr) const;

 private:
  mutable std::mutex mutex_;
  std::list<std::shared_ptr<Entry>> entries_;  // in submission order
};

}  // namespace vlkv::server
