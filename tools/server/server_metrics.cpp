#include "server/server_metrics.h"

#include <cstdio>

namespace vlkv::server {

void ServerMetrics::record_generation(const GenerationResult& r, const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Counters* c : {&all_, &by_tenant_[tenant]}) {
    c->prompt_tokens += r.stats.n_prompt_tokens;
    c->generated_tokens += r.stats.n_generated;
    c->prefill_seconds += r.stats.prefill_seconds;
    c->decode_seconds += r.stats.decode_seconds;
    PerMethod& m = c->per_method[r.kv.method];
    ++m.requests;
    m.prompt_tokens += r.stats.n_prompt_tokens;
    m.generated_tokens += r.stats.n_generated;
  }
}

void ServerMetrics::record_response(int status, const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Counters* c : {&all_, &by_tenant_[tenant]}) {
    if (status >= 200 && status < 300) {
      ++c->done;
    } else {
      ++c->failed;
      ++c->failed_by_status[status];
    }
  }
}

void ServerMetrics::record_disconnect(const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++all_.disconnected;
  ++by_tenant_[tenant].disconnected;
}

namespace {

// Label values escaped as the exposition format asks (backslash, quote, newline).
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void metric(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP vlkv:") + name + " " + help + "\n# TYPE vlkv:" + name + " " + type + "\n";
}

void value(std::string& out, const char* name, const std::string& labels, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  out += std::string("vlkv:") + name + (labels.empty() ? "" : "{" + labels + "}") + " " + buf + "\n";
}

// The gauges and counters of the whole server's load (KV memory, caches, stores).
void write_load(std::string& o, const BackendLoad& load);

}  // namespace

std::string ServerMetrics::prometheus(const BackendLoad& load) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string o;
  write_counters(o, all_, &load);
  return o;
}

std::string ServerMetrics::prometheus_of(const std::string& tenant) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string o;
  auto it = by_tenant_.find(tenant);
  write_counters(o, it == by_tenant_.end() ? Counters{} : it->second, nullptr);
  return o;
}

void ServerMetrics::write_counters(std::string& o, const Counters& c, const BackendLoad* load) {
  if (load) {
    metric(o, "requests_running", "gauge", "Requests generating now.");
    value(o, "requests_running", "", static_cast<double>(load->running));
    metric(o, "requests_queued", "gauge", "Requests waiting for a slot.");
    value(o, "requests_queued", "", static_cast<double>(load->queued));
  }
  metric(o, "requests_done_total", "counter", "Generation requests answered successfully.");
  value(o, "requests_done_total", "", static_cast<double>(c.done));
  metric(o, "requests_failed_total", "counter", "Generation requests answered with an error, by HTTP status.");
  value(o, "requests_failed_total", "", static_cast<double>(c.failed));
  for (const auto& [status, n] : c.failed_by_status)
    value(o, "requests_failed_total", "status=\"" + std::to_string(status) + "\"", static_cast<double>(n));
  metric(o, "requests_disconnected_total", "counter", "Requests whose client left before the end (queued, prefilling or generating).");
  value(o, "requests_disconnected_total", "", static_cast<double>(c.disconnected));
  metric(o, "prompt_tokens_total", "counter", "Prompt tokens evaluated (text and visual).");
  value(o, "prompt_tokens_total", "", static_cast<double>(c.prompt_tokens));
  metric(o, "tokens_predicted_total", "counter", "Tokens generated.");
  value(o, "tokens_predicted_total", "", static_cast<double>(c.generated_tokens));
  metric(o, "prompt_tokens_seconds", "gauge", "Average prompt throughput, tokens/s of prefill time.");
  value(o, "prompt_tokens_seconds", "", c.prefill_seconds > 0 ? c.prompt_tokens / c.prefill_seconds : 0.0);
  metric(o, "predicted_tokens_seconds", "gauge", "Average generation throughput, tokens/s of decode time.");
  value(o, "predicted_tokens_seconds", "", c.decode_seconds > 0 ? c.generated_tokens / c.decode_seconds : 0.0);
  if (load) {
    metric(o, "kv_bytes_in_use", "gauge", "KV cache bytes of pages held now, per KV method.");
    for (const KvMethodLoad& m : load->kv) value(o, "kv_bytes_in_use", "method=\"" + label(m.method) + "\"", static_cast<double>(m.bytes_in_use));
    metric(o, "kv_budget_bytes", "gauge", "KV cache budget, per KV method.");
    for (const KvMethodLoad& m : load->kv) value(o, "kv_budget_bytes", "method=\"" + label(m.method) + "\"", static_cast<double>(m.budget_bytes));
    metric(o, "kv_bits_per_element", "gauge", "Stored bits per K/V element incl. metadata, per KV method.");
    for (const KvMethodLoad& m : load->kv) value(o, "kv_bits_per_element", "method=\"" + label(m.method) + "\"", m.bits_per_element);
  }
  metric(o, "kv_requests_total", "counter", "Generations run, per KV method.");
  for (const auto& [method, m] : c.per_method) value(o, "kv_requests_total", "method=\"" + label(method) + "\"", static_cast<double>(m.requests));
  metric(o, "kv_prompt_tokens_total", "counter", "Prompt tokens, per KV method.");
  for (const auto& [method, m] : c.per_method) value(o, "kv_prompt_tokens_total", "method=\"" + label(method) + "\"", static_cast<double>(m.prompt_tokens));
  metric(o, "kv_tokens_predicted_total", "counter", "Tokens generated, per KV method.");
  for (const auto& [method, m] : c.per_method) value(o, "kv_tokens_predicted_total", "method=\"" + label(method) + "\"", static_cast<double>(m.generated_tokens));
  if (!load) return;
  write_load(o, *load);
}

namespace {
void write_load(std::string& o, const BackendLoad& load) {
  metric(o, "prefix_cache_bytes", "gauge", "KV pages held by idle prefix-cache entries (within the KV budget).");
  value(o, "prefix_cache_bytes", "", static_cast<double>(load.prefix_cache_bytes));
  metric(o, "prefix_cache_budget_bytes", "gauge", "The prefix cache's cap (--cache-budget; 0: off).");
  value(o, "prefix_cache_budget_bytes", "", static_cast<double>(load.prefix_cache_budget_bytes));
  struct Counter {
    const char* name;
    const char* type;
    const char* help;
    double (*get)(const PrefixCacheMethodStats&);
  };
  const Counter counters[] = {
      {"prefix_cache_hits_total", "counter", "Requests that took a prompt prefix from the cache, per KV method.",
       [](const PrefixCacheMethodStats& m) { return static_cast<double>(m.hits); }},
      {"prefix_cache_misses_total", "counter", "Requests that found no cached prefix, per KV method.",
       [](const PrefixCacheMethodStats& m) { return static_cast<double>(m.misses); }},
      {"prefix_cache_cached_tokens_total", "counter", "Prompt tokens taken from the cache (not evaluated), per KV method.",
       [](const PrefixCacheMethodStats& m) { return static_cast<double>(m.cached_tokens); }},
      {"prefix_cache_evictions_total", "counter", "Entries evicted, per KV method.",
       [](const PrefixCacheMethodStats& m) { return static_cast<double>(m.evicted); }},
      {"prefix_cache_replaced_total", "counter",
       "Entries dropped for the longer entry of their conversation's next turn, per KV method.",
       [](const PrefixCacheMethodStats& m) { return static_cast<double>(m.replaced); }},
      {"prefix_cache_media_not_kept_total", "counter",
       "Requests whose media rows the cache keeps no entries for (VidKV: its visual rows depend on all of the "
       "prompt's text, so no other prompt could reuse them), per KV method.",
       [](const PrefixCacheMethodStats& m) { return static_cast<double>(m.media_not_kept); }},
      {"prefix_cache_entries", "gauge", "Entries held now, per KV method.",
       [](const PrefixCacheMethodStats& m) { return static_cast<double>(m.entries); }},
      {"prefix_cache_tokens", "gauge", "Tokens the entries hold, per KV method.",
       [](const PrefixCacheMethodStats& m) { return static_cast<double>(m.tokens); }},
      {"prefix_cache_method_bytes", "gauge", "KV pages the entries hold, per KV method.",
       [](const PrefixCacheMethodStats& m) { return static_cast<double>(m.bytes); }},
  };
  for (const Counter& c : counters) {
    metric(o, c.name, c.type, c.help);
    for (const PrefixCacheMethodStats& m : load.prefix_cache) value(o, c.name, "method=\"" + label(m.method) + "\"", c.get(m));
  }
  metric(o, "media_cache_hits_total", "counter", "Images and videos whose vision encoding came from the cache.");
  value(o, "media_cache_hits_total", "", static_cast<double>(load.media_cache_hits));
  metric(o, "media_cache_misses_total", "counter", "Images and videos not in the encoder cache (encoded, or left unencoded under a prefix hit).");
  value(o, "media_cache_misses_total", "", static_cast<double>(load.media_cache_misses));
  metric(o, "media_cache_bytes", "gauge", "Bytes of vision encoder outputs kept.");
  value(o, "media_cache_bytes", "", static_cast<double>(load.media_cache_bytes));
  metric(o, "media_encodes_total", "counter",
         "Images and videos the vision encoder ran on (not those an encoder-cache or prefix-cache hit covered).");
  value(o, "media_encodes_total", "", static_cast<double>(load.media_encodes));
  struct StoreCounter {
    const char* name;
    const char* help;
    double (*get)(const PrefixStoreStats&);
  };
  const StoreCounter store_counters[] = {
      {"prefix_store_hits_total", "Lookups in a prefix store (--cache-dir, --redis) that found an entry.",
       [](const PrefixStoreStats& m) { return static_cast<double>(m.hits); }},
      {"prefix_store_misses_total", "Lookups that found none (store down or slow included).",
       [](const PrefixStoreStats& m) { return static_cast<double>(m.misses); }},
      {"prefix_store_refused_total", "Entries found but refused (corrupt, other model or method, over a cap): recomputed.",
       [](const PrefixStoreStats& m) { return static_cast<double>(m.refused); }},
      {"prefix_store_forged_total",
       "Of the refused entries, those whose MAC under --cache-secret-file failed (written by someone else): never loaded.",
       [](const PrefixStoreStats& m) { return static_cast<double>(m.forged); }},
      {"prefix_store_errors_total", "Store operations that failed or timed out.",
       [](const PrefixStoreStats& m) { return static_cast<double>(m.errors); }},
      {"prefix_store_writes_total", "Entries written.", [](const PrefixStoreStats& m) { return static_cast<double>(m.writes); }},
      {"prefix_store_dropped_total", "Entries not written (over a cap, store down, queue full).",
       [](const PrefixStoreStats& m) { return static_cast<double>(m.dropped); }},
      {"prefix_store_read_bytes_total", "Bytes of entries read.",
       [](const PrefixStoreStats& m) { return static_cast<double>(m.bytes_read); }},
      {"prefix_store_written_bytes_total", "Bytes of entries written.",
       [](const PrefixStoreStats& m) { return static_cast<double>(m.bytes_written); }},
  };
  if (!load.stores.empty())
    for (const StoreCounter& c : store_counters) {
      metric(o, c.name, "counter", c.help);
      for (const PrefixStoreStats& m : load.stores) value(o, c.name, "store=\"" + label(m.kind) + "\"", c.get(m));
    }
}

}  // namespace

}  // namespace vlkv::server
