#include "ingest_resume.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "base/safe_file.h"
#include "engine/content_hash.h"

namespace vlkv::cli {
namespace {

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the SIGINT handler needs a lock-free flag");

extern "C" void on_sigint(int) {
  if (g_stop.load(std::memory_order_relaxed)) {  // asked twice: stop now
    signal(SIGINT, SIG_DFL);
    raise(SIGINT);
    return;
  }
  g_stop.store(true, std::memory_order_relaxed);
  static const char kNote[] =
      "\nvlkv: Ctrl-C: stopping at the next frame, after a checkpoint (Ctrl-C again to quit at once)\n";
  const ssize_t ignored = write(STDERR_FILENO, kNote, sizeof kNote - 1);
  (void)ignored;
}

std::string short_hex(const Digest128& d) { return d.hex().substr(0, 16); }

}  // namespace

int64_t default_checkpoint_every(bool wanted, int64_t n_frames) {
  if (!wanted || n_frames < 64) return 0;
  return std::max<int64_t>(16, (n_frames + 9) / 10);
}

Result<std::string> media_file_identity(const std::string& path) {
  VLKV_ASSIGN_OR_RETURN(RegularFile f, open_regular_file(path));
  constexpr uint64_t kEnd = 64 << 10;
  std::string buf(static_cast<size_t>(std::min(f.size, kEnd)), '\0');
  Sha256 h;
  h.update_value(f.size);
  VLKV_RETURN_IF_ERROR(read_exactly(f, 0, buf.data(), buf.size(), path));
  h.update(buf.data(), buf.size());
  const uint64_t tail = std::min(f.size, kEnd);
  VLKV_RETURN_IF_ERROR(read_exactly(f, f.size - tail, buf.data(), static_cast<size_t>(tail), path));
  h.update(buf.data(), static_cast<size_t>(tail));
  return std::to_string(f.size) + " bytes, sha256 of its ends " + short_hex(h.finish128());
}

Result<std::vector<IngestInput>> ingest_inputs(const std::string& prompt, bool use_template,
                                               const std::vector<std::string>& images,
                                               const std::vector<std::string>& videos, int32_t frames, double fps) {
  std::vector<IngestInput> out;
  Sha256 h;
  h.update(prompt.data(), prompt.size());
  out.push_back({"prompt", std::to_string(prompt.size()) + " bytes, sha256 " + short_hex(h.finish128())});
  out.push_back({"chat template", use_template ? "used" : "not used (--no-template)"});
  for (size_t i = 0; i < images.size(); ++i) {
    VLKV_ASSIGN_OR_RETURN(std::string id, media_file_identity(images[i]));
    out.push_back({"image " + std::to_string(i + 1) + " file", id});
  }
  for (size_t i = 0; i < videos.size(); ++i) {
    VLKV_ASSIGN_OR_RETURN(std::string id, media_file_identity(videos[i]));
    out.push_back({"video " + std::to_string(i + 1) + " file", id});
  }
  char sampling[64];
  if (fps > 0) std::snprintf(sampling, sizeof sampling, "--fps %g", fps);
  else std::snprintf(sampling, sizeof sampling, "--frames %d", frames);
  out.push_back({"video sampling", sampling});
  return out;
}

const std::atomic<bool>* arm_interrupt() {
  g_stop.store(false);
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  return &g_stop;
}

void disarm_interrupt() { signal(SIGINT, SIG_DFL); }

}  // namespace vlkv::cli
