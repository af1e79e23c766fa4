// `vlkv serve`: an OpenAI-compatible HTTP server (tools/server/) over the model. Listens
// at once (/health says 503 while the model loads), serves until SIGTERM/SIGINT, then
// refuses new requests, lets running ones finish for a few seconds and exits 0.
#include <malloc.h>
#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include "commands.h"
#include "hub_flags.h"
#include "kv_flags.h"
#include "param_flags.h"
#include "server/authenticated_store.h"
#include "server/cache_secret.h"
#include "server/dir_store.h"
#include "server/http_server.h"
#include "server/redis_store.h"
#include "server/scheduler_backend.h"
#include "server/session_backend.h"

namespace vlkv::cli {
namespace {

struct ServeOptions {
  server::HttpOptions http;
  server::BackendOptions backend;
  std::string backend_kind = "auto";
  std::string kv = "f16";
  std::string kv_allow;
  std::string kv_budget = kKvBudgetAuto;  // the one default rule: tools/kv_flags.h
  std::string cache_budget = "1G";
  std::string redis;                    // HOST:PORT ("": no shared store)
  int64_t redis_ttl_s = 3600;
  std::string redis_max_entry = "256M";
  std::string redis_budget = "4G";
  std::string cache_dir;                // "": evicted entries are dropped
  std::string cache_dir_budget = "8G";
  std::string cache_secret_file;        // "": --redis refused; --cache-dir keeps its own in DIR
  std::string max_body = "32M";
  std::string alias;
  int shutdown_grace_ms = 3000;
  int header_timeout_s = 10;
  int body_timeout_s = 60;
  // Tenants and trust edges (tools/server/tenants.h).
  std::string api_key;
  bool api_key_given = false;
  std::string api_keys_file;
  bool allow_unauthenticated = false;
  std::string allowed_hosts;
};

// --api-key, --api-keys, --host, --cors-origin and --allowed-hosts: the keys and tenants in
// o.http, or why the server must not start. An open server is a deliberate choice.
Status check_access_flags(ServeOptions& o) {
  if (o.api_key_given) {
    if (o.api_key.empty()) return invalid_argument("--api-key \"\": an empty key would let anyone in (leave the flag out, or give a key)");
    if (Status st = o.http.keys.add(o.api_key, "default"); !st.is_ok()) return invalid_argument("--api-key: " + st.message());
  }
  if (!o.api_keys_file.empty()) {
    std::string warning;
    if (Status st = server::load_api_keys_file(o.api_keys_file, o.http.keys, &warning); !st.is_ok()) return st;
    if (!warning.empty()) std::fprintf(stderr, "vlkv serve: warning: %s\n", warning.c_str());
  }
  const bool open = o.http.keys.empty();
  if (open && !o.allow_unauthenticated && !server::is_loopback_host(o.http.host))
    return invalid_argument("--host " + o.http.host + " without --api-key or --api-keys: anyone who reaches this address "
                            "could use the server (give a key, or --allow-unauthenticated to mean it)");
  if (o.http.cors_origin == "*") {
    if (open && !o.allow_unauthenticated)
      return invalid_argument("--cors-origin '*' without an API key lets every web page a local user opens call this "
                              "server and read its answers (give a key, name the page's origin, or --allow-unauthenticated)");
    if (!open)
      std::fprintf(stderr, "vlkv serve: warning: --cors-origin '*': any web page given a key may call the API "
                           "(browsers never send it on their own; name the page's origin to narrow it)\n");
  }
  if (!o.http.admin_tenant.empty() && open) return invalid_argument("--admin-tenant needs --api-key or --api-keys");
  size_t from = 0;
  while (from <= o.allowed_hosts.size() && !o.allowed_hosts.empty()) {
    const size_t comma = std::min(o.allowed_hosts.find(',', from), o.allowed_hosts.size());
    const std::string name = o.allowed_hosts.substr(from, comma - from);
    if (name.empty()) return invalid_argument("--allowed-hosts '" + o.allowed_hosts + "': an empty name");
    o.http.allowed_hosts.push_back(name);
    from = comma + 1;
  }
  return Status::ok();
}

constexpr int kMallocMmapThreshold = 4 << 20;

std::string file_stem(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  const size_t dot = name.rfind(".gguf");
  return dot == std::string::npos ? name : name.substr(0, dot);
}

int serve(const ServeOptions& o_in) {
  ServeOptions o = o_in;
  if (o.backend.engine.model_path.empty()) return report_error(invalid_argument("--model is required"));
  if (Status st = check_access_flags(o); !st.is_ok()) return report_error(st);
  if (o.http.limits.video_fps > 0 && o.http.limits.video_frames != server::RequestLimits{}.video_frames)
    return report_error(invalid_argument("give --video-frames or --video-fps, not both"));
  Result<uint64_t> budget = parse_kv_budget_flag(o.kv_budget);
  if (!budget.is_ok()) return report_error(budget.status());
  o.backend.engine.kv_budget_bytes = *budget;
  Result<uint64_t> cache_budget = parse_byte_size(o.cache_budget);
  if (!cache_budget.is_ok()) return report_error(invalid_argument("--cache-budget: " + cache_budget.status().message()));
  o.backend.cache_budget_bytes = *cache_budget;
  if (*cache_budget == 0) o.backend.engine.media_cache_bytes = 0;  // no cache of any kind: every request pays in full
  // Entries in Redis and --cache-dir are signed under the deployment's secret: one that
  // does not verify (planted by whoever can write there) is refused before it is parsed.
  std::optional<server::CacheSecret> secret;
  auto signed_store = [&](std::shared_ptr<PrefixStore> store, const std::string& default_path) -> Result<std::shared_ptr<PrefixStore>> {
    if (!secret) {
      const std::string path = o.cache_secret_file.empty() ? default_path : o.cache_secret_file;
      Result<server::CacheSecret> s = server::load_or_create_cache_secret(path);
      if (!s.is_ok()) return s.status();
      secret = std::move(s).value();
      if (secret->created)
        std::fprintf(stderr, "vlkv serve: created %s (32 random bytes, mode 0600): prefix-store entries are signed with it%s\n",
                     path.c_str(), o.redis.empty() ? "" : "; every replica sharing --redis needs a copy of this file");
    }
    return std::shared_ptr<PrefixStore>(std::make_shared<server::AuthenticatedStore>(std::move(store), secret->bytes));
  };
  if (!o.redis.empty() && o.cache_secret_file.empty())
    return report_error(invalid_argument(
        "--redis needs --cache-secret-file PATH: the secret every replica signs and checks shared entries with (a "
        "missing file is created with 32 random bytes; or make one with head -c 32 /dev/urandom > PATH && chmod 600 "
        "PATH), the same file on every replica"));
  if (!o.redis.empty()) {
    if (o.backend_kind == "sessions") return report_error(invalid_argument("--redis needs --backend batch (the prefix cache)"));
    if (*cache_budget == 0) return report_error(invalid_argument("--redis needs the prefix cache: --cache-budget 0 turns it off"));
    server::RedisOptions ro;
    if (Status st = server::parse_redis_address(o.redis, &ro); !st.is_ok()) return report_error(st);
    Result<uint64_t> max_entry = parse_byte_size(o.redis_max_entry);
    if (!max_entry.is_ok() || *max_entry == 0)
      return report_error(invalid_argument("--redis-max-entry '" + o.redis_max_entry + "': expected a size such as 256M"));
    Result<uint64_t> total = parse_byte_size(o.redis_budget);
    if (!total.is_ok() || *total == 0)
      return report_error(invalid_argument("--redis-budget '" + o.redis_budget + "': expected a size such as 4G"));
    ro.ttl_seconds = o.redis_ttl_s;
    ro.max_entry_bytes = *max_entry;
    ro.max_total_bytes = *total;
    Result<std::shared_ptr<PrefixStore>> store = signed_store(std::make_shared<server::RedisStore>(ro), "");
    if (!store.is_ok()) return report_error(store.status());
    o.backend.shared_store = std::move(store).value();
  }
  if (!o.cache_dir.empty()) {
    if (o.backend_kind == "sessions") return report_error(invalid_argument("--cache-dir needs --backend batch (the prefix cache)"));
    if (*cache_budget == 0) return report_error(invalid_argument("--cache-dir needs the prefix cache: --cache-budget 0 turns it off"));
    Result<uint64_t> total = parse_byte_size(o.cache_dir_budget);
    if (!total.is_ok() || *total == 0)
      return report_error(invalid_argument("--cache-dir-budget '" + o.cache_dir_budget + "': expected a size such as 8G"));
    server::DirStoreOptions d;
    d.dir = o.cache_dir;
    d.max_total_bytes = *total;
    Result<std::unique_ptr<server::DirStore>> dir = server::DirStore::open(d);
    if (!dir.is_ok()) return report_error(dir.status());
    Result<std::shared_ptr<PrefixStore>> store =
        signed_store(std::shared_ptr<PrefixStore>(std::move(dir).value()), o.cache_dir + "/.vlkv-secret");
    if (!store.is_ok()) return report_error(store.status());
    o.backend.spill_store = std::move(store).value();
  }
  Result<uint64_t> max_body = parse_byte_size(o.max_body);
  if (!max_body.is_ok()) return report_error(invalid_argument("--max-body: " + max_body.status().message()));
  o.http.transport.max_body_bytes = *max_body;
  // The default method first, then the others allowed per request.
  o.backend.kv_methods = {o.kv};
  for (const std::string& m : split_kv_method_list(o.kv_allow))
    if (std::find(o.backend.kv_methods.begin(), o.backend.kv_methods.end(), m) == o.backend.kv_methods.end())
      o.backend.kv_methods.push_back(m);
  for (const std::string& m : o.backend.kv_methods)
    if (Status st = check_kv_method_flag(m, m == o.kv ? "--kv" : "--kv-allow"); !st.is_ok()) return report_error(st);
  o.http.limits.media = o.backend.engine.media_limits;
  o.http.model_name = o.alias.empty() ? file_stem(o.backend.engine.model_path) : o.alias;
  o.http.model_path = o.backend.engine.model_path;
  o.http.n_slots = o.backend.n_slots;
  o.http.transport.header_timeout = std::chrono::seconds(o.header_timeout_s);
  o.http.transport.body_timeout = std::chrono::seconds(o.body_timeout_s);
  // Enough HTTP threads for every slot, every queued request and a few probes.
  o.http.n_http_threads = o.backend.n_slots + o.backend.max_queue + 8;

  // Request bodies (up to --max-body, a chunked one growing by doubling) must go back to
  // the system once freed. glibc raises its mmap threshold to the largest block freed (up
  // to 32 MiB), after which such blocks come from per-thread heaps whose free top
  // malloc_trim does not return: each refused 100 MiB chunked body kept ~50 MiB resident.
  // Fixed thresholds stop that adjustment: blocks of 4 MiB and more are mapped and unmapped.
  mallopt(M_MMAP_THRESHOLD, kMallocMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kMallocMmapThreshold);

  // SIGTERM/SIGINT are taken by sigwait below: blocked in every thread started from here.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  server::HttpServer http(o.http);
  Result<int> port = http.bind();
  if (!port.is_ok()) return report_error(port.status());
  std::fprintf(stderr, "vlkv serve: listening on http://%s:%d\n", o.http.host.c_str(), *port);
  std::fflush(stderr);
  std::thread listener([&http] { http.listen(); });

  // auto: the batched scheduler for text models; sessions for vision models (the
  // scheduler takes token prompts only, no images yet).
  const bool batch = o.backend_kind == "batch" || o.backend_kind == "auto";
  Result<std::unique_ptr<server::GenerationBackend>> backend = [&]() -> Result<std::unique_ptr<server::GenerationBackend>> {
    if (batch) {
      Result<std::unique_ptr<server::SchedulerBackend>> b = server::SchedulerBackend::create(o.backend);
      if (!b.is_ok()) return b.status();
      return std::unique_ptr<server::GenerationBackend>(std::move(b).value());
    }
    Result<std::unique_ptr<server::SessionBackend>> b = server::SessionBackend::create(o.backend);
    if (!b.is_ok()) return b.status();
    return std::unique_ptr<server::GenerationBackend>(std::move(b).value());
  }();
  if (!backend.is_ok()) {
    http.stop(std::chrono::milliseconds(0));
    listener.join();
    return report_error(check_kv_load_error(backend.status(), o.kv));
  }
  const Engine& e = (*backend)->model();
  if (Status st = check_kv_budget_for_model(*budget, o.kv_budget, e.info()); !st.is_ok()) {
    http.stop(std::chrono::milliseconds(0));
    listener.join();
    return report_error(st);
  }
  http.set_backend(backend->get());
  std::string methods;
  for (const std::string& m : o.backend.kv_methods) methods += (methods.empty() ? "" : ", ") + m;
  std::fprintf(stderr, "vlkv serve: %s ready (%s, ctx %lld, %s backend, %d slots, queue %d, kv %s)\n",
               o.http.model_name.c_str(), e.has_vision() ? "vision" : "text", static_cast<long long>(e.params().n_ctx),
               batch ? "batch" : "sessions", o.backend.n_slots, o.backend.max_queue, methods.c_str());
  std::fflush(stderr);

  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "vlkv serve: %s: finishing running requests\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  // Past the drain (grace, the streams' last events, a few seconds to close the stores) the
  // process ends whatever is still stuck: a read from a stalled disk cannot be interrupted.
  std::thread([limit = std::chrono::milliseconds(o.shutdown_grace_ms + 2000 + 3000)] {
    std::this_thread::sleep_for(limit);
    std::fprintf(stderr, "vlkv serve: still stopping after %lld ms (a store stuck?): exiting now\n",
                 static_cast<long long>(limit.count()));
    std::fflush(stderr);
    std::_Exit(1);
  }).detach();
  http.refuse_new();
  (*backend)->shutdown(std::chrono::milliseconds(o.shutdown_grace_ms));
  http.stop(std::chrono::milliseconds(2000));  // the last events of streams still being written
  listener.join();
  backend->reset();
  std::fprintf(stderr, "vlkv serve: stopped\n");
  return kExitOk;
}

}  // namespace

void add_serve_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* app = root.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions)");
  add_param_flags(*app, o->backend.engine, {"model", "mmproj"});
  app->add_option("--host", o->http.host, "Address to listen on (loopback by default)")->capture_default_str();
  app->add_option("--port", o->http.port, "Port (0: any free port, printed on stderr)")
      ->check(CLI::Range(0, 65535))->capture_default_str();
  CLI::Option* api_key = app->add_option("--api-key", o->api_key,
                                         "Require 'Authorization: Bearer KEY' (not for /health); one tenant, \"default\"");
  app->add_option("--api-keys", o->api_keys_file,
                  "Tenants: a file of \"KEY TENANT\" lines (# comments). Tenants share no cache entry and see only "
                  "their own requests in /slots and /metrics");
  app->add_option("--admin-tenant", o->http.admin_tenant, "The tenant that sees every request in /slots and /metrics");
  app->add_flag("--allow-unauthenticated", o->allow_unauthenticated,
                "Start without a key on a non-loopback --host, or with --cors-origin '*' and no key");
  app->add_option("--allowed-hosts", o->allowed_hosts,
                  "Host header names accepted besides localhost, 127.0.0.1, ::1 and --host (comma-separated; * for "
                  "any). Checked when --host is loopback (DNS rebinding) or this is given; others get 403");
  app->add_option("--alias", o->alias, "Model name in /v1/models and responses (default: the file's name)");
  app->add_option("--kv", o->kv, kv_method_help(false))->capture_default_str();
  app->add_option("--kv-allow", o->kv_allow,
                  "KV methods a request may pick with \"kv\" (comma-separated; --kv is always allowed). --backend "
                  "batch: all in one pool; sessions: one model instance per method, each with its own --kv-budget");
  app->add_option("--kv-budget", o->kv_budget, "KV cache memory budget (e.g. 512M, 4G; " + kv_budget_auto_help() + "): the pool every request shares (--backend sessions: per KV method)")
      ->capture_default_str();
  app->add_option("--cache-budget", o->cache_budget,
                  "Prefix cache (--backend batch): KV of earlier prompts' prefixes kept by content (tokens, image "
                  "pixels) for later turns and questions, at most SIZE of the --kv-budget, evicted first when "
                  "requests need pages (0: off, and the vision encoder's output cache too)")
      ->capture_default_str();
  app->add_option("--cache-tenant-share", o->backend.cache_tenant_share,
                  "Of --cache-budget, the most one tenant's entries may hold (its new entries evict its own "
                  "first); at 1/tenants or less no tenant's entries push out another's (--api-keys)")
      ->check(CLI::Range(0.001, 1.0))->capture_default_str();
  app->add_option("--cache-dir", o->cache_dir,
                  "Spill prefix-cache entries evicted from memory to files in DIR (KV file format) and load them back "
                  "when a prompt starts with one; files from another model or method are refused")
      ->check(CLI::NonexistentPath | CLI::ExistingDirectory);
  app->add_option("--cache-dir-budget", o->cache_dir_budget,
                  "Disk --cache-dir may take (least recently used files removed first)")
      ->capture_default_str();
  app->add_option("--redis", o->redis,
                  "Share prefix-cache entries with other replicas through Redis at HOST:PORT: a request the local "
                  "cache misses looks there before computing, and every entry kept here is written there (checked "
                  "like a KV file when read back; Redis down or slow = a miss, never a failed request)");
  app->add_option("--cache-secret-file", o->cache_secret_file,
                  "Secret that --redis and --cache-dir entries are signed with (HMAC-SHA256): an entry that does not "
                  "verify is refused, never loaded. Created (32 random bytes, mode 0600) when absent; replicas sharing "
                  "a Redis need the same file. Required with --redis; --cache-dir alone keeps one in DIR/.vlkv-secret");
  app->add_option("--redis-ttl", o->redis_ttl_s, "Seconds an entry stays in Redis after it was written")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 31))->capture_default_str();
  app->add_option("--redis-max-entry", o->redis_max_entry, "Largest entry written to or read from Redis")
      ->capture_default_str();
  app->add_option("--redis-budget", o->redis_budget,
                  "No entry is written while Redis's used memory (all replicas' entries) plus it would pass SIZE")
      ->capture_default_str();
  app->add_option("--parallel", o->backend.n_slots, "Requests generating at once (also -np)")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  app->add_option("--max-queue", o->backend.max_queue, "Requests waiting for a slot; more get 503")
      ->check(CLI::Range(0, 1 << 16))->capture_default_str();
  app->add_option("--timeout", o->http.timeout_seconds, "Seconds a request may take, queued and generating (0: none)")
      ->check(CLI::Range(0, 1 << 24))->capture_default_str();
  app->add_option("--max-body", o->max_body, "Largest request body (e.g. 32M); larger get 413")->capture_default_str();
  app->add_option("--header-timeout", o->header_timeout_s,
                  "Seconds a client has to send a request's head (request line and headers); also how long an idle "
                  "keep-alive connection is kept")
      ->check(CLI::Range(1, 3600))->capture_default_str();
  app->add_option("--body-timeout", o->body_timeout_s, "Seconds a client has to send a request's body")
      ->check(CLI::Range(1, 3600))->capture_default_str();
  app->add_option("--max-conn-per-ip", o->http.transport.max_connections_per_address,
                  "Open connections one client address may hold; more are answered 503 and closed")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app->add_option("--cors-origin", o->http.cors_origin,
                  "Let web pages from ORIGIN (e.g. http://localhost:3000, or * for any) call the API (CORS; off by "
                  "default). The API key is still required; preflight OPTIONS requests are answered without it");
  app->add_option("--max-images", o->http.limits.max_images, "Images and videos in one request")
      ->check(CLI::Range(0, 1024))->capture_default_str();
  app->add_option("--video-frames", o->http.limits.video_frames,
                  "Frames sampled uniformly from each video of a request (video_url parts)")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app->add_option("--video-fps", o->http.limits.video_fps,
                  "Sample each video at this many frames per second instead of --video-frames (e.g. 2 for tinyvideo, "
                  "its training rate)")
      ->check(CLI::Range(0.001, 1000.0));
  add_param_flags(*app, o->backend.engine, {"max_image_pixels", "image_min_tokens", "image_max_tokens"});
  app->add_option("--media-path", o->http.limits.media_path,
                  "Directory file:// image and video URLs may be read from (default: file:// refused)")
      ->check(CLI::ExistingDirectory);
  app->add_option("--backend", o->backend_kind,
                  "batch: continuous batching (one KV pool for every method; text and image prompts); sessions: one "
                  "Session per request, one model instance per KV method; auto: batch")
      ->check(CLI::IsMember({"auto", "batch", "sessions"}))->capture_default_str();
  add_param_flags(*app, o->backend.engine, {"n_threads", "n_ctx", "n_batch", "exact_matmul"});
  app->add_option("--token-delay-ms", o->backend.token_delay_ms,
                  "Testing aid: sleep this long after each generated token (makes requests last long enough to "
                  "disconnect or fill the queue)")
      ->check(CLI::Range(0, 10000))->group("Testing");
  auto hub = add_hub_flags(*app, o->backend.engine.model_path, o->backend.engine.mmproj_path);
  commands.push_back({app, run_after_hub_download(hub, [o, api_key] {
                        o->api_key_given = api_key->count() > 0;
                        return serve(*o);
                      })});
}

}  // namespace vlkv::cli
