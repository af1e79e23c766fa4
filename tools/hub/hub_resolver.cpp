#include "hub/hub_resolver.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hub/hub_cache.h"
#include "hub/hub_file_pick.h"
#include "hub/hub_http.h"
#include "hub/hub_repo_ref.h"

namespace vlkv::hub {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxRefsJson = 1 << 20;
constexpr size_t kMaxTreeJson = 16u << 20;  // a repo of thousands of files lists in well under 1 MiB

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// Percent-encodes what a URL path may not hold; '/' separates the repo's folders.
std::string url_path(const std::string& path) {
  static const char* kDigits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kDigits[c >> 4];
      out += kDigits[c & 15];
    }
  }
  return out;
}

std::string human_bytes(int64_t n) {
  char buf[32];
  if (n >= (int64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", n / double(int64_t{1} << 30));
  else std::snprintf(buf, sizeof buf, "%.1f MiB", n / double(1 << 20));
  return buf;
}

struct Listing {
  std::string commit;
  std::vector<RepoFile> files;
};

// A failed listing: the status to report, and whether the network (not the hub) failed.
struct ListingError {
  Status status;
  bool network = false;
};

Result<nlohmann::json> api_json(const std::string& url, const std::string& token, size_t max, const std::string& what,
                                ListingError* err) {
  HttpReply r = http_get(url, token, max);
  if (r.status == 0) {
    err->network = true;
    return io_error("cannot reach " + model_endpoint() + " (" + r.transport_error + ")");
  }
  if (r.status != 200) {
    std::string body = r.body;
    nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    if (j.is_object() && j.contains("error") && j["error"].is_string()) body = j["error"].get<std::string>();
    return http_error(what, r.status, body);
  }
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded()) return invalid_file(what + ": the hub's answer is not JSON");
  return j;
}

Result<Listing> list_remote(const std::string& repo, const fs::path& repo_dir, const std::string& token,
                            ListingError* err) {
  const std::string base = model_endpoint() + "api/models/" + repo;
  VLKV_ASSIGN_OR_RETURN(nlohmann::json refs, api_json(base + "/refs", token, kMaxRefsJson, repo, err));
  Listing listing;
  std::string branch;
  if (refs.is_object() && refs.contains("branches") && refs["branches"].is_array()) {
    for (const nlohmann::json& b : refs["branches"]) {
      if (!b.is_object() || !b.contains("name") || !b["name"].is_string() || !b.contains("targetCommit") ||
          !b["targetCommit"].is_string())
        continue;
      const std::string name = b["name"].get<std::string>();
      const std::string commit = b["targetCommit"].get<std::string>();
      if (!is_hex(commit, 40) || name.find('/') != std::string::npos || !is_safe_relative_path(name)) continue;
      if (name == "main" || listing.commit.empty()) {
        branch = name;
        listing.commit = commit;
      }
      if (name == "main") break;
    }
  }
  if (listing.commit.empty()) return invalid_file(repo + ": the hub listed no usable branch");
  VLKV_ASSIGN_OR_RETURN(nlohmann::json tree, api_json(base + "/tree/" + listing.commit + "?recursive=true", token,
                                                      kMaxTreeJson, repo, err));
  if (!tree.is_array()) return invalid_file(repo + ": the hub's file list is not a list");
  for (const nlohmann::json& item : tree) {
    if (!item.is_object() || item.value("type", "") != "file" || !item.contains("path") || !item["path"].is_string())
      continue;
    RepoFile f;
    f.path = item["path"].get<std::string>();
    if (!is_safe_relative_path(f.path)) continue;  // never a path out of the snapshot folder
    const nlohmann::json* src = &item;
    if (item.contains("lfs") && item["lfs"].is_object()) src = &item["lfs"];
    if (src->contains("oid") && (*src)["oid"].is_string()) f.oid = (*src)["oid"].get<std::string>();
    if (src->contains("size") && (*src)["size"].is_number_integer()) f.size = (*src)["size"].get<int64_t>();
    if (!f.oid.empty() && !is_hex(f.oid, 40) && !is_hex(f.oid, 64)) continue;
    if (f.size < -1) f.size = -1;
    listing.files.push_back(std::move(f));
  }
  // Written once the listing is complete, so the cache's "main" always has its file list.
  if (Status st = write_ref(repo_dir, branch, listing.commit); !st.is_ok()) return st;
  return listing;
}

Result<Listing> list_cached(const fs::path& repo_dir) {
  Listing listing;
  listing.commit = read_cached_commit(repo_dir);
  if (!listing.commit.empty()) listing.files = cached_snapshot_files(repo_dir, listing.commit);
  return listing;
}

struct Picked {
  const RepoFile* model = nullptr;
  const RepoFile* mmproj = nullptr;
};

Result<Picked> pick(const HubRequest& req, const HubRepoRef& ref, const Listing& listing, const std::string& where) {
  Picked p;
  if (!req.hf_file.empty()) {
    p.model = find_file(listing.files, req.hf_file);
    if (!p.model)
      return not_found(ref.repo + ": no file '" + req.hf_file + "'" + where + "; its GGUF files: " +
                       list_gguf_files(listing.files));
  } else {
    p.model = pick_model_file(listing.files, ref.quant);
    if (!p.model) {
      const std::string what = ref.quant.empty() ? "no model GGUF file" : "no GGUF file of quant " + ref.quant;
      return not_found(ref.repo + ": " + what + where + "; its GGUF files: " + list_gguf_files(listing.files));
    }
  }
  if (int parts = split_count_of(p.model->path); parts > 1)
    return unsupported(ref.repo + ": " + p.model->path + " is split in " + std::to_string(parts) +
                       " parts; vlkv loads single-file GGUFs (merge them with llama-gguf-split --merge)");
  if (req.want_mmproj) p.mmproj = pick_mmproj_file(listing.files, p.model->path);
  return p;
}

// The snapshot path of `file`, downloading its content first when the cache lacks it.
Result<std::string> fetch(const HubRequest& req, const std::string& repo, const fs::path& repo_dir,
                          const std::string& commit, const RepoFile& file, bool online) {
  const fs::path snap = snapshot_path(repo_dir, commit, file.path);
  std::error_code ec;
  if (fs::is_regular_file(snap, ec)) return snap.string();
  if (!online) return not_found(repo + "/" + file.path + ": not in the cache " + repo_dir.string());
  const fs::path dest = download_path(repo_dir, commit, file);
  if (!fs::is_regular_file(dest, ec)) {
    DownloadSpec spec;
    spec.url = model_endpoint() + repo + "/resolve/" + commit + "/" + url_path(file.path);
    spec.dest = dest;
    spec.token = req.token;
    spec.expected_size = file.size;
    spec.oid = file.oid;
    spec.label = repo + "/" + file.path;
    // Refused before a byte is fetched when the disk cannot hold it.
    if (const fs::space_info space = fs::space(repo_dir, ec); !ec && file.size > 0 &&
        static_cast<uintmax_t>(file.size) > space.available) {
      return io_error(spec.label + " needs " + human_bytes(file.size) + "; " +
                      human_bytes(static_cast<int64_t>(space.available)) + " free under " + repo_dir.string());
    }
    std::fprintf(stderr, "vlkv: downloading %s%s into %s\n", spec.label.c_str(),
                 file.size >= 0 ? (" (" + human_bytes(file.size) + ")").c_str() : "", repo_dir.c_str());
    VLKV_RETURN_IF_ERROR(download_file(spec));
  }
  VLKV_RETURN_IF_ERROR(link_snapshot(dest, snap));
  return snap.string();
}

}  // namespace

std::string model_endpoint() {
  std::string e = env("MODEL_ENDPOINT");
  if (e.empty()) e = env("HF_ENDPOINT");  // the older name, as llama.cpp still reads it
  if (e.empty()) e = "https://huggingface.co/";
  if (e.back() != '/') e += '/';
  return e;
}

Result<HubFiles> resolve_hub_files(const HubRequest& req) {
  VLKV_ASSIGN_OR_RETURN(HubRepoRef ref, parse_hub_repo_ref(req.repo_ref));
  VLKV_RETURN_IF_ERROR(check_token(req.token));
  VLKV_ASSIGN_OR_RETURN(fs::path cache, hub_cache_dir());
  const fs::path repo_dir = repo_cache_dir(cache, ref.repo);

  Listing listing;
  bool online = !req.offline;
  std::string where;  // " in the cached snapshot ..." when the listing came from the cache
  if (online) {
    ListingError err;
    Result<Listing> remote = list_remote(ref.repo, repo_dir, req.token, &err);
    if (remote.is_ok()) {
      listing = std::move(remote).value();
    } else {
      // As llama.cpp: a repo the hub cannot list now is used from the cache, if it is there.
      VLKV_ASSIGN_OR_RETURN(listing, list_cached(repo_dir));
      Result<Picked> cached_pick = pick(req, ref, listing, "");
      bool usable = cached_pick.is_ok();
      if (usable) {
        std::error_code ec;
        usable = fs::is_regular_file(snapshot_path(repo_dir, listing.commit, cached_pick->model->path), ec);
      }
      if (!usable) {
        Status st = remote.status();
        return Status(st.code(), st.message() + (err.network ? "; and " + ref.repo + " is not in the cache " +
                                                                   repo_dir.string() + " to run offline"
                                                             : ""));
      }
      std::fprintf(stderr, "vlkv: %s; using the cached copy of %s (snapshot %s)\n", remote.status().message().c_str(),
                   ref.repo.c_str(), listing.commit.substr(0, 12).c_str());
      online = false;
    }
  } else {
    VLKV_ASSIGN_OR_RETURN(listing, list_cached(repo_dir));
    if (listing.files.empty())
      return not_found(ref.repo + ": not in the cache " + repo_dir.string() + " (--offline: nothing is downloaded)");
  }
  if (!online) where = " in the cached snapshot " + listing.commit.substr(0, 12) + " under " + repo_dir.string();

  VLKV_ASSIGN_OR_RETURN(Picked picked, pick(req, ref, listing, where));
  HubFiles out;
  VLKV_ASSIGN_OR_RETURN(out.model_path, fetch(req, ref.repo, repo_dir, listing.commit, *picked.model, online));
  if (picked.mmproj) {
    VLKV_ASSIGN_OR_RETURN(out.mmproj_path, fetch(req, ref.repo, repo_dir, listing.commit, *picked.mmproj, online));
  }
  return out;
}

Result<std::string> resolve_url_file(const std::string& url, const std::string& token, bool offline) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    return invalid_argument("--mmproj-url '" + url.substr(0, 200) + "': expected an http:// or https:// URL");
  std::string name = url.substr(0, url.find_first_of("?#"));
  name = name.substr(name.rfind('/') + 1);
  if (name.find('/') != std::string::npos || !is_safe_relative_path(name))
    return invalid_argument("--mmproj-url '" + url.substr(0, 200) + "': the URL names no file");
  VLKV_ASSIGN_OR_RETURN(fs::path dir, url_cache_dir());
  const fs::path dest = dir / name;
  const fs::path etag_path = dest.string() + ".etag";
  std::error_code ec;
  // The token goes only where the models come from, never to another host.
  const std::string endpoint = model_endpoint();
  const std::string sent_token = url.rfind(endpoint, 0) == 0 ? token : std::string();
  VLKV_RETURN_IF_ERROR(check_token(sent_token));
  if (fs::is_regular_file(dest, ec)) {
    if (offline) return dest.string();
    // Unchanged (same ETag), unknown (no ETag) or unreachable: the cached file is used, as llama.cpp does.
    HttpReply head = http_get(url, sent_token, 0, /*head_only=*/true);
    std::string old_etag;
    std::ifstream etag_in(etag_path);
    std::getline(etag_in, old_etag);
    if (head.status < 200 || head.status >= 300 || head.etag.empty() || head.etag == old_etag) return dest.string();
    fs::remove(dest, ec);
  } else if (offline) {
    return not_found("--mmproj-url: " + name + " is not in the cache " + dir.string() + " (--offline)");
  }
  DownloadSpec spec;
  spec.url = url;
  spec.dest = dest;
  spec.token = sent_token;
  spec.label = name;
  std::fprintf(stderr, "vlkv: downloading %s into %s\n", url.c_str(), dir.c_str());
  std::string etag;
  VLKV_RETURN_IF_ERROR(download_file(spec, &etag));
  if (!etag.empty()) {
    std::ofstream(etag_path, std::ios::trunc) << etag;
  }
  return dest.string();
}

}  // namespace vlkv::hub
