#include "hub_flags.h"

#include <cstdlib>

#include "commands.h"
#include "hub/hub_resolver.h"

namespace vlkv::cli {

std::shared_ptr<HubFlags> add_hub_flags(CLI::App& app, std::string& model_path, std::string& mmproj_path) {
  auto hub = std::make_shared<HubFlags>();
  hub->model_path = &model_path;
  hub->mmproj_path = &mmproj_path;
  // --model may now come from the hub: whether one of the two was given is checked in resolve().
  if (CLI::Option* m = app.get_option_no_throw("--model"); m && m->get_required()) {
    m->required(false);
    hub->model_required = true;
  }
  // expected(0, 1): a bare -hf reaches resolve() and gets a one-line error, not CLI11's usage text.
  hub->repo_option = app.add_option("--hf-repo", hub->repo,
                                    "Hugging Face model repo USER/REPO[:QUANT] (as llama.cpp's -hf): downloads (or "
                                    "finds in the cache) its GGUF of that quant (default Q4_K_M, then Q8_0, then the "
                                    "first) and its mmproj; the cache is llama.cpp's ($LLAMA_CACHE, else "
                                    "~/.cache/huggingface/hub)")
                         ->expected(0, 1);
  app.add_option("--hf-file", hub->file, "With --hf-repo: this file of the repo instead of the quant's");
  app.add_option("--hf-token", hub->token, "Hugging Face access token for gated/private repos (default: $HF_TOKEN)");
  app.add_option("--mmproj-url", hub->mmproj_url,
                 "Download the mmproj from this URL (cached in $LLAMA_CACHE, else ~/.cache/llama.cpp)");
  app.add_flag("--offline", hub->offline, "Use only what the download cache holds; no network");
  app.add_flag("--no-mmproj", hub->no_mmproj, "With --hf-repo: do not fetch the repo's mmproj");
  return hub;
}

Status HubFlags::resolve() {
  const bool repo_given = repo_option && repo_option->count() > 0;
  if (!repo_given) {
    if (!file.empty()) return invalid_argument("--hf-file needs --hf-repo USER/REPO");
    if (model_required && model_path->empty()) return invalid_argument("--model is required (or --hf-repo USER/REPO)");
  } else if (!model_path->empty()) {
    return invalid_argument("give --model or --hf-repo, not both");
  }
  if (token.empty()) {
    if (const char* t = std::getenv("HF_TOKEN")) token = t;
  }
  if (!mmproj_url.empty()) {
    if (!mmproj_path->empty()) return invalid_argument("give --mmproj or --mmproj-url, not both");
    Result<std::string> path = hub::resolve_url_file(mmproj_url, token, offline);
    if (!path.is_ok()) return path.status();
    *mmproj_path = *path;
  }
  if (!repo_given) return Status::ok();
  hub::HubRequest req;
  req.repo_ref = repo;
  req.hf_file = file;
  req.token = token;
  req.offline = offline;
  req.want_mmproj = !no_mmproj && mmproj_path->empty();
  Result<hub::HubFiles> files = hub::resolve_hub_files(req);
  if (!files.is_ok()) return files.status();
  *model_path = files->model_path;
  if (!files->mmproj_path.empty()) *mmproj_path = files->mmproj_path;
  return Status::ok();
}

std::function<int()> run_after_hub_download(std::shared_ptr<HubFlags> hub, std::function<int()> run) {
  return [hub, run] {
    if (Status st = hub->resolve(); !st.is_ok()) return report_error(st);
    return run();
  };
}

}  // namespace vlkv::cli
