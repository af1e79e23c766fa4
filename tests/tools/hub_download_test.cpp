// -hf USER/REPO[:QUANT] against a loopback hub (fake_hub.py): the API resolution, the CDN
// redirect, Range resumption, 401/404, hash checks, offline use of the cache, and the cache
// layout llama.cpp shares (models--OWNER--NAME/{refs,blobs,snapshots}).
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "cli_util.h"
#include "fake_hub.h"
#include "hub/hub_file_pick.h"
#include "hub/hub_repo_ref.h"
#include "hub/hub_resolver.h"

namespace vlkv {
namespace {

namespace fs = std::filesystem;
using testing_hub::FakeHub;
using testing_hub::ScopedEnv;
using testing_hub::slurp;

constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";
constexpr const char* kToken = "hf_TestTokenTestTokenTestTokenTestToken01";

std::string sha256_hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) hex += "0123456789abcdef"[md[i] >> 4], hex += "0123456789abcdef"[md[i] & 15];
  return hex;
}

std::string fixture(const std::string& name) { return std::string(VLKV_TEST_DATA) + "/fixtures/" + name; }

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / ("vlkv_hub_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A file of `n` pseudo-random bytes (distinct per seed), so a wrong byte anywhere shows.
fs::path random_file(const fs::path& dir, const std::string& name, size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string data(n, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  std::ofstream(dir / name, std::ios::binary) << data;
  return dir / name;
}

// A repo with two quants, a projector and a README, served from `dir`.
nlohmann::json basic_config(const fs::path& dir) {
  nlohmann::json repo;
  repo["files"] = {{"Tiny-Q4_K_M.gguf", random_file(dir, "q4.bin", 300000, 1).string()},
                   {"Tiny-Q8_0.gguf", random_file(dir, "q8.bin", 200000, 2).string()},
                   {"mmproj-Tiny-f16.gguf", random_file(dir, "mm.bin", 100000, 3).string()},
                   {"README.md", random_file(dir, "readme.bin", 500, 4).string()}};
  nlohmann::json cfg;
  cfg["commit"] = kCommit;
  cfg["repos"]["ggml-org/Tiny-GGUF"] = repo;
  return cfg;
}

struct HubEnv {
  explicit HubEnv(FakeHub& hub)
      : endpoint("MODEL_ENDPOINT", hub.endpoint()), cache("LLAMA_CACHE", hub.cache().string()), token("HF_TOKEN", "") {}
  ScopedEnv endpoint, cache, token;
};

Result<hub::HubFiles> resolve(const std::string& ref, bool offline = false, const std::string& file = "",
                              const std::string& token = "") {
  hub::HubRequest r;
  r.repo_ref = ref;
  r.hf_file = file;
  r.offline = offline;
  r.token = token;
  return hub::resolve_hub_files(r);
}

fs::path repo_dir(const FakeHub& hub) { return hub.cache() / "models--ggml-org--Tiny-GGUF"; }

int count_requests(const FakeHub& hub, const std::string& path_part) {
  int n = 0;
  for (const auto& r : hub.requests()) n += r.path.find(path_part) != std::string::npos;
  return n;
}

TEST(HubRepoRef, ParsesRepoAndQuantAndRefusesTheRest) {
  auto r = hub::parse_hub_repo_ref("ggml-org/Qwen2.5-VL-3B-Instruct-GGUF:q8_0");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->repo, "ggml-org/Qwen2.5-VL-3B-Instruct-GGUF");
  EXPECT_EQ(r->quant, "q8_0");
  EXPECT_EQ(hub::parse_hub_repo_ref("a/b")->quant, "");
  for (const char* bad : {"", "noslash", "a/b/c", "../x", "a//b", "a/b:", "a/b:Q4 K", "/a", "a/.b", "a/b:x:y",
                          "a b/c", "a/b\n"}) {
    EXPECT_FALSE(hub::parse_hub_repo_ref(bad).is_ok()) << bad;
  }
}

TEST(HubFilePick, QuantDefaultOrderSplitsAndMmprojAsLlamaCpp) {
  using hub::RepoFile;
  std::vector<RepoFile> files;
  for (const char* path : {"M-F16.gguf", "M-Q8_0.gguf", "M-Q4_K_M-00002-of-00002.gguf", "M-Q4_K_M-00001-of-00002.gguf",
                           "mmproj-M-f16.gguf", "mmproj-M-Q8_0.gguf", "sub/mmproj-deep-f16.gguf", "M-imatrix.gguf"}) {
    RepoFile f;
    f.path = path;
    files.push_back(f);
  }
  EXPECT_EQ(hub::pick_model_file(files, "")->path, "M-Q4_K_M-00001-of-00002.gguf");
  EXPECT_EQ(hub::pick_model_file(files, "q8_0")->path, "M-Q8_0.gguf");
  EXPECT_EQ(hub::pick_model_file(files, "Q5_K_M"), nullptr);
  files.erase(files.begin() + 2, files.begin() + 4);
  EXPECT_EQ(hub::pick_model_file(files, "")->path, "M-Q8_0.gguf");
  files.erase(files.begin() + 1);
  EXPECT_EQ(hub::pick_model_file(files, "")->path, "M-F16.gguf");  // the first model GGUF
  // The projector in the model's folder, bits closest to the model's (Q8_0 -> 8, f16 -> 16).
  EXPECT_EQ(hub::pick_mmproj_file(files, "M-Q8_0.gguf")->path, "mmproj-M-Q8_0.gguf");
  EXPECT_EQ(hub::pick_mmproj_file(files, "M-F16.gguf")->path, "mmproj-M-f16.gguf");
  EXPECT_EQ(hub::pick_mmproj_file(files, "sub/M-Q8_0.gguf")->path, "sub/mmproj-deep-f16.gguf");  // deepest folder
  EXPECT_EQ(hub::split_count_of("M-Q4_K_M-00001-of-00002.gguf"), 2);
  EXPECT_EQ(hub::quant_tag_of("x/M.Q4_K_M-00001-of-00002.gguf"), "Q4_K_M");
}

TEST(HubDownload, DefaultQuantAndMmprojThroughApiAndCdnRedirect) {
  const fs::path dir = fresh_dir("basic");
  FakeHub hub(basic_config(dir), dir);
  ASSERT_TRUE(hub.running());
  HubEnv env(hub);
  auto r = resolve("ggml-org/Tiny-GGUF");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const fs::path snap = repo_dir(hub) / "snapshots" / kCommit;
  EXPECT_EQ(fs::path(r->model_path), snap / "Tiny-Q4_K_M.gguf");
  EXPECT_EQ(fs::path(r->mmproj_path), snap / "mmproj-Tiny-f16.gguf");
  EXPECT_EQ(slurp(r->model_path), slurp(dir / "q4.bin"));
  EXPECT_EQ(slurp(r->mmproj_path), slurp(dir / "mm.bin"));
  // llama.cpp's layout: the snapshot entry is a relative link to blobs/<sha256>, refs/main names the commit.
  ASSERT_TRUE(fs::is_symlink(r->model_path));
  const fs::path target = fs::read_symlink(r->model_path);
  EXPECT_TRUE(target.is_relative());
  EXPECT_EQ(target.parent_path().filename(), "blobs");
  EXPECT_EQ(slurp(repo_dir(hub) / "refs" / "main"), kCommit);
  EXPECT_FALSE(fs::exists(repo_dir(hub) / "blobs" / (target.filename().string() + ".downloadInProgress")));
  // refs, tree, then each file through /resolve/ and its 302 to the CDN; a User-Agent, no token.
  const auto reqs = hub.requests();
  ASSERT_GE(reqs.size(), 6u);
  EXPECT_EQ(reqs[0].path, "/api/models/ggml-org/Tiny-GGUF/refs");
  EXPECT_EQ(reqs[1].path, std::string("/api/models/ggml-org/Tiny-GGUF/tree/") + kCommit + "?recursive=true");
  EXPECT_EQ(reqs[2].path, std::string("/ggml-org/Tiny-GGUF/resolve/") + kCommit + "/Tiny-Q4_K_M.gguf");
  EXPECT_EQ(reqs[3].path.rfind("/cdn/", 0), 0u);
  for (const auto& q : reqs) {
    EXPECT_FALSE(q.user_agent.empty());
    EXPECT_EQ(q.authorization, "");
  }
  // A second resolution downloads nothing: the files are in the cache.
  hub.clear_log();
  auto again = resolve("ggml-org/Tiny-GGUF");
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->model_path, r->model_path);
  EXPECT_EQ(count_requests(hub, "/resolve/"), 0);
  EXPECT_EQ(count_requests(hub, "/cdn/"), 0);
}

TEST(HubDownload, ExplicitQuantHfFileAndNoMmproj) {
  const fs::path dir = fresh_dir("quant");
  FakeHub hub(basic_config(dir), dir);
  ASSERT_TRUE(hub.running());
  HubEnv env(hub);
  auto q8 = resolve("ggml-org/Tiny-GGUF:q8_0");
  ASSERT_TRUE(q8.is_ok()) << q8.status().message();
  EXPECT_EQ(slurp(q8->model_path), slurp(dir / "q8.bin"));
  hub::HubRequest req;
  req.repo_ref = "ggml-org/Tiny-GGUF";
  req.hf_file = "README.md";  // a git (non-LFS) file: served directly, checked against its git sha1
  req.want_mmproj = false;
  auto f = hub::resolve_hub_files(req);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(slurp(f->model_path), slurp(dir / "readme.bin"));
  EXPECT_EQ(f->mmproj_path, "");
}

TEST(HubDownload, GatedRepoAsksForHfTokenAndTheTokenOpensIt) {
  const fs::path dir = fresh_dir("gated");
  nlohmann::json cfg = basic_config(dir);
  cfg["repos"]["ggml-org/Tiny-GGUF"]["token"] = kToken;
  FakeHub hub(cfg, dir);
  ASSERT_TRUE(hub.running());
  HubEnv env(hub);
  auto denied = resolve("ggml-org/Tiny-GGUF");
  ASSERT_FALSE(denied.is_ok());
  EXPECT_NE(denied.status().message().find("401"), std::string::npos) << denied.status().message();
  EXPECT_NE(denied.status().message().find("HF_TOKEN"), std::string::npos) << denied.status().message();
  EXPECT_FALSE(fs::exists(repo_dir(hub) / "snapshots"));
  auto ok = resolve("ggml-org/Tiny-GGUF", false, "", kToken);
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(slurp(ok->model_path), slurp(dir / "q4.bin"));
  EXPECT_GT(count_requests(hub, "/resolve/"), 0);
  for (const auto& q : hub.requests()) {
    if (q.path.find("/api/") == 0 && q.authorization != "") {
      EXPECT_EQ(q.authorization, std::string("Bearer ") + kToken);
    }
  }
  // The CLI without HF_TOKEN (and nothing cached): a one-line error and exit 2.
  fs::remove_all(hub.cache());
  auto no_token = testing_cli::run_cli({"run", "--hf-repo", "ggml-org/Tiny-GGUF", "-p", "hi"});
  EXPECT_EQ(no_token.exit_code, 2);
  EXPECT_NE(no_token.err.find("set HF_TOKEN"), std::string::npos) << no_token.err;
}

// The hub lists a gated repo's files to anyone but serves them only with a token.
TEST(HubDownload, GatedFileDownloadAsksForHfTokenAndLeavesNothing) {
  const fs::path dir = fresh_dir("gated_files");
  nlohmann::json cfg = basic_config(dir);
  cfg["repos"]["ggml-org/Tiny-GGUF"]["token_files"] = kToken;
  FakeHub hub(cfg, dir);
  ASSERT_TRUE(hub.running());
  HubEnv env(hub);
  auto denied = resolve("ggml-org/Tiny-GGUF");
  ASSERT_FALSE(denied.is_ok());
  EXPECT_NE(denied.status().message().find("401"), std::string::npos) << denied.status().message();
  EXPECT_NE(denied.status().message().find("HF_TOKEN"), std::string::npos) << denied.status().message();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(repo_dir(hub) / "blobs", ec)) ADD_FAILURE() << "left: " << e.path();
  auto ok = resolve("ggml-org/Tiny-GGUF", false, "", kToken);
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(slurp(ok->model_path), slurp(dir / "q4.bin"));
}

TEST(HubDownload, UnknownRepoIs404AndUnknownQuantListsTheRepoFiles) {
  const fs::path dir = fresh_dir("404");
  FakeHub hub(basic_config(dir), dir);
  ASSERT_TRUE(hub.running());
  HubEnv env(hub);
  auto repo = resolve("ggml-org/Nope-GGUF");
  ASSERT_FALSE(repo.is_ok());
  EXPECT_EQ(repo.status().code(), StatusCode::kNotFound);
  EXPECT_NE(repo.status().message().find("404"), std::string::npos) << repo.status().message();
  auto quant = resolve("ggml-org/Tiny-GGUF:Q5_K_M");
  ASSERT_FALSE(quant.is_ok());
  EXPECT_EQ(quant.status().code(), StatusCode::kNotFound);
  const std::string& m = quant.status().message();
  EXPECT_NE(m.find("Q5_K_M"), std::string::npos) << m;
  EXPECT_NE(m.find("Tiny-Q4_K_M.gguf (Q4_K_M)"), std::string::npos) << m;
  EXPECT_NE(m.find("Tiny-Q8_0.gguf (Q8_0)"), std::string::npos) << m;
  EXPECT_EQ(count_requests(hub, "/resolve/"), 0);
}

TEST(HubDownload, CutTransferIsResumedWithRangeToTheSameBytes) {
  const fs::path dir = fresh_dir("cut");
  nlohmann::json cfg = basic_config(dir);
  cfg["repos"]["ggml-org/Tiny-GGUF"]["cut_first"] = {"Tiny-Q4_K_M.gguf"};
  FakeHub hub(cfg, dir);
  ASSERT_TRUE(hub.running());
  HubEnv env(hub);
  hub::HubRequest req;
  req.repo_ref = "ggml-org/Tiny-GGUF";
  req.want_mmproj = false;
  auto r = hub::resolve_hub_files(req);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(slurp(r->model_path), slurp(dir / "q4.bin"));
  std::vector<std::string> cdn_ranges;
  for (const auto& q : hub.requests()) {
    if (q.path.rfind("/cdn/", 0) == 0) cdn_ranges.push_back(q.range);
  }
  ASSERT_EQ(cdn_ranges.size(), 2u);
  EXPECT_EQ(cdn_ranges[0], "");
  EXPECT_EQ(cdn_ranges[1], "bytes=150000-");  // the half the first transfer delivered
}

TEST(HubDownload, PartialFileOfAnEarlierRunIsResumed) {
  const fs::path dir = fresh_dir("partial");
  FakeHub hub(basic_config(dir), dir);
  ASSERT_TRUE(hub.running());
  HubEnv env(hub);
  // What llama.cpp (or vlkv) leaves when interrupted: blobs/<sha256>.downloadInProgress.
  const std::string full = slurp(dir / "q4.bin");
  fs::create_directories(repo_dir(hub) / "blobs");
  std::ofstream(repo_dir(hub) / "blobs" / (sha256_hex(full) + ".downloadInProgress"), std::ios::binary)
      << full.substr(0, 123456);
  hub::HubRequest req;
  req.repo_ref = "ggml-org/Tiny-GGUF";
  req.want_mmproj = false;
  auto r = hub::resolve_hub_files(req);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(slurp(r->model_path), full);
  EXPECT_EQ(fs::read_symlink(r->model_path).filename().string(), sha256_hex(full));
  std::vector<std::string> cdn_ranges;
  for (const auto& q : hub.requests()) {
    if (q.path.rfind("/cdn/", 0) == 0) cdn_ranges.push_back(q.range);
  }
  EXPECT_EQ(cdn_ranges, std::vector<std::string>{"bytes=123456-"});
}

// Two resolutions at once (two replicas on one cache): one downloads, the other waits for it.
TEST(HubDownload, ConcurrentResolutionsDownloadOnce) {
  const fs::path dir = fresh_dir("concurrent");
  nlohmann::json cfg = basic_config(dir);
  cfg["repos"]["ggml-org/Tiny-GGUF"]["slow"] = {"Tiny-Q4_K_M.gguf"};
  FakeHub hub(cfg, dir);
  ASSERT_TRUE(hub.running());
  HubEnv env(hub);
  hub::HubRequest req;
  req.repo_ref = "ggml-org/Tiny-GGUF";
  req.want_mmproj = false;
  Result<hub::HubFiles> a = io_error("not run"), b = io_error("not run");
  std::thread ta([&] { a = hub::resolve_hub_files(req); });
  std::thread tb([&] { b = hub::resolve_hub_files(req); });
  ta.join();
  tb.join();
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(a->model_path, b->model_path);
  EXPECT_EQ(slurp(a->model_path), slurp(dir / "q4.bin"));
  EXPECT_EQ(count_requests(hub, "/cdn/"), 1);
}

TEST(HubDownload, CorruptDownloadNeverLandsInTheCache) {
  const fs::path dir = fresh_dir("corrupt");
  nlohmann::json cfg = basic_config(dir);
  cfg["repos"]["ggml-org/Tiny-GGUF"]["corrupt"] = {"Tiny-Q4_K_M.gguf"};
  FakeHub hub(cfg, dir);
  ASSERT_TRUE(hub.running());
  HubEnv env(hub);
  auto r = resolve("ggml-org/Tiny-GGUF");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("sha256"), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(repo_dir(hub) / "snapshots" / kCommit / "Tiny-Q4_K_M.gguf"));
  for (const auto& e : fs::directory_iterator(repo_dir(hub) / "blobs")) ADD_FAILURE() << "left: " << e.path();
}

TEST(HubDownload, FileLargerThanTheFreeDiskIsRefusedBeforeDownload) {
  const fs::path dir = fresh_dir("space");
  nlohmann::json cfg = basic_config(dir);
  cfg["repos"]["ggml-org/Tiny-GGUF"]["claim_size"] = {{"Tiny-Q4_K_M.gguf", int64_t{1} << 60}};
  FakeHub hub(cfg, dir);
  ASSERT_TRUE(hub.running());
  HubEnv env(hub);
  auto r = resolve("ggml-org/Tiny-GGUF");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("free under"), std::string::npos) << r.status().message();
  EXPECT_EQ(count_requests(hub, "/resolve/"), 0);
}

TEST(HubDownload, CachedFilesAreUsedOfflineAndWhenTheHubIsUnreachable) {
  const fs::path dir = fresh_dir("offline");
  FakeHub hub(basic_config(dir), dir);
  ASSERT_TRUE(hub.running());
  HubEnv env(hub);
  auto online = resolve("ggml-org/Tiny-GGUF");
  ASSERT_TRUE(online.is_ok()) << online.status().message();
  hub.stop();  // the endpoint now refuses connections
  auto offline = resolve("ggml-org/Tiny-GGUF", /*offline=*/true);
  ASSERT_TRUE(offline.is_ok()) << offline.status().message();
  EXPECT_EQ(offline->model_path, online->model_path);
  EXPECT_EQ(offline->mmproj_path, online->mmproj_path);
  EXPECT_EQ(slurp(offline->model_path), slurp(dir / "q4.bin"));
  // Not --offline, but the hub is down: the cache is used, and the CLI says so.
  auto fallback = resolve("ggml-org/Tiny-GGUF");
  ASSERT_TRUE(fallback.is_ok()) << fallback.status().message();
  EXPECT_EQ(fallback->model_path, online->model_path);
  auto cli = testing_cli::run_cli({"run", "--hf-repo", "ggml-org/Tiny-GGUF", "-p", "hi", "-n", "1"});
  EXPECT_NE(cli.err.find("cannot reach"), std::string::npos) << cli.err;
  EXPECT_NE(cli.err.find("using the cached copy of ggml-org/Tiny-GGUF"), std::string::npos) << cli.err;
  // A quant that was never downloaded is not there offline.
  auto missing = resolve("ggml-org/Tiny-GGUF:Q8_0", /*offline=*/true);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("Q8_0"), std::string::npos) << missing.status().message();
  auto down = resolve("ggml-org/Other-GGUF");
  ASSERT_FALSE(down.is_ok());
  EXPECT_NE(down.status().message().find("cannot reach"), std::string::npos) << down.status().message();
}

// A cache as llama.cpp (or huggingface_hub) writes it, made by hand: used as is, nothing downloaded.
TEST(HubDownload, LlamaCppCacheLayoutIsUsedWithoutDownload) {
  const fs::path dir = fresh_dir("layout");
  FakeHub hub(basic_config(dir), dir);
  ASSERT_TRUE(hub.running());
  HubEnv env(hub);
  const fs::path repo = repo_dir(hub);
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / kCommit);
  std::ofstream(repo / "refs" / "main") << kCommit;
  const std::string blob = std::string(64, 'a');
  fs::copy_file(dir / "q4.bin", repo / "blobs" / blob);
  fs::create_symlink(fs::path("../../blobs") / blob, repo / "snapshots" / kCommit / "Tiny-Q4_K_M.gguf");
  auto offline = resolve("ggml-org/Tiny-GGUF", /*offline=*/true);
  ASSERT_TRUE(offline.is_ok()) << offline.status().message();
  EXPECT_EQ(offline->model_path, (repo / "snapshots" / kCommit / "Tiny-Q4_K_M.gguf").string());
  EXPECT_EQ(offline->mmproj_path, "");  // not in that cache
  // Online, the hub lists the same commit: the model is not fetched again (its projector is).
  hub::HubRequest req;
  req.repo_ref = "ggml-org/Tiny-GGUF";
  auto online = hub::resolve_hub_files(req);
  ASSERT_TRUE(online.is_ok()) << online.status().message();
  EXPECT_EQ(online->model_path, offline->model_path);
  EXPECT_EQ(count_requests(hub, "/resolve/" + std::string(kCommit) + "/Tiny-Q4_K_M.gguf"), 0);
  EXPECT_EQ(count_requests(hub, "/resolve/" + std::string(kCommit) + "/mmproj-Tiny-f16.gguf"), 1);
  EXPECT_EQ(slurp(online->mmproj_path), slurp(dir / "mm.bin"));
}

TEST(HubDownload, MmprojUrlGoesToLlamaCppsCacheFolderWithItsEtag) {
  const fs::path dir = fresh_dir("url");
  nlohmann::json cfg = basic_config(dir);
  cfg["plain"]["mmproj-x.gguf"] = random_file(dir, "plain.bin", 70000, 9).string();
  FakeHub hub(cfg, dir);
  ASSERT_TRUE(hub.running());
  HubEnv env(hub);
  auto p = hub::resolve_url_file(hub.endpoint() + "plain/mmproj-x.gguf?download=true", "", false);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ(fs::path(*p), hub.cache() / "mmproj-x.gguf");
  EXPECT_EQ(slurp(*p), slurp(dir / "plain.bin"));
  EXPECT_FALSE(slurp(*p + ".etag").empty());
  hub.clear_log();
  auto again = hub::resolve_url_file(hub.endpoint() + "plain/mmproj-x.gguf?download=true", "", false);
  ASSERT_TRUE(again.is_ok());
  for (const auto& q : hub.requests()) EXPECT_EQ(q.method, "HEAD");  // same ETag: not downloaded again
  EXPECT_FALSE(hub::resolve_url_file(hub.endpoint() + "plain/", "", false).is_ok());
}

// End to end: `vlkv run --hf-repo` fetches a real (tiny) model and its projector and runs them.
TEST(HubCli, RunWithHfRepoFetchesModelAndMmprojAndCountsAsTheLocalFiles) {
  const fs::path dir = fresh_dir("cli");
  nlohmann::json cfg;
  cfg["commit"] = kCommit;
  cfg["repos"]["tiny/Qwen2-VL-tiny-GGUF"]["files"] = {
      {"Qwen2-VL-tiny-Q4_K_M.gguf", fixture("models/qwen2vl-tiny-text.gguf")},
      {"mmproj-Qwen2-VL-tiny-f16.gguf", fixture("models/mmproj-tiny-qwen2vl.gguf")}};
  FakeHub hub(cfg, dir);
  ASSERT_TRUE(hub.running());
  HubEnv env(hub);
  const std::string image = fixture("images/test_image_64.png");
  auto local = testing_cli::run_cli({"run", "-m", fixture("models/qwen2vl-tiny-text.gguf"), "--mmproj",
                                     fixture("models/mmproj-tiny-qwen2vl.gguf"), "--image", image, "-p", "what?",
                                     "--count-tokens"});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  auto remote = testing_cli::run_cli({"run", "--hf-repo", "tiny/Qwen2-VL-tiny-GGUF", "--image", image, "-p", "what?",
                                      "--count-tokens"});
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_EQ(remote.out, local.out);
  EXPECT_NE(remote.out.find("visual_tokens="), std::string::npos);
  // --no-mmproj: the text model alone, so images are refused.
  auto text_only = testing_cli::run_cli({"run", "--hf-repo", "tiny/Qwen2-VL-tiny-GGUF", "--no-mmproj", "--image", image,
                                         "-p", "what?", "--count-tokens"});
  EXPECT_EQ(text_only.exit_code, 2);
}

TEST(HubCli, BareOrMalformedHfRepoIsAOneLineErrorWithExit2) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "--hf-repo"}, {"run", "--hf-repo", "-p", "hi"}, {"run", "--hf-repo", "noslash"},
        {"chat", "--hf-repo", "a/b/c"}, {"serve", "--hf-repo", "a/b:"}, {"bench", "--hf-repo", "x"},
        {"eval", "--hf-repo", "../etc"}, {"run", "--hf-file", "x.gguf", "-p", "hi"}}) {
    auto r = testing_cli::run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args[1] << " " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.find("Usage"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  // bench and eval still need a model: --model or --hf-repo.
  auto none = testing_cli::run_cli({"bench"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("--model is required (or --hf-repo"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace vlkv
