// `vlkv run --video ... --save-kv F` stopped part way (--stop-after-frames, or Ctrl-C: SIGINT)
// and run again with --resume: the answer and the saved file are the uninterrupted run's, byte
// for byte, and only the frames after the checkpoint are encoded; a checkpoint of another ingest
// (prompt, --kv, video) or a damaged one is refused with exit status 2 and a line that says why.
// The bundled tinyvideo pair (time labels between frames) on a 2 fps MPEG-4 clip of the demo's
// frames made by the ffmpeg tool.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "cli_util.h"

namespace vlkv {
namespace {

std::string models() { return std::string(VLKV_SOURCE_DIR) + "/models/"; }
std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "vlkv_resume_" + std::to_string(getpid()) + "_" + name;
}

std::string make_clip(int n_frames, const std::string& name) {
  const std::string clip = temp_path(name);
  const std::string cmd = "ffmpeg -loglevel error -y -framerate 2 -i " + models() +
                          "demo/video/v128_0/%03d.png -frames:v " + std::to_string(n_frames) +
                          " -pix_fmt yuv420p -c:v mpeg4 -q:v 2 -g 8 " + clip + " 2>/dev/null";
  return std::system(cmd.c_str()) == 0 ? clip : std::string();
}

std::vector<std::string> ingest_args(const std::string& clip, const std::string& kv, const std::string& save,
                                     const std::string& prompt = "How many times did the square appear?") {
  return {"run", "-m", models() + "tinyvideo.gguf", "--mmproj", models() + "tinyvideo-mmproj.gguf", "--video", clip,
          "--fps", "2", "-p", prompt, "--temp", "0", "-n", "6", "-t", "2", "--kv", kv, "--save-kv", save,
          "--checkpoint-every", "4"};
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// "(... visual, N frames encoded in" from the run's figures line; -1 if absent.
long frames_encoded(const std::string& err) {
  std::smatch m;
  return std::regex_search(err, m, std::regex("visual, ([0-9]+) frames encoded in")) ? std::stol(m[1]) : -1;
}

TEST(CliIngestResume, StoppedAtHalfThenResumedIsTheUninterruptedRunByteForByte) {
  const std::string clip = make_clip(16, "clip.mp4");
  ASSERT_FALSE(clip.empty()) << "the ffmpeg tool could not make the test clip";
  for (const std::string kv : {"f16", "kivi2"}) {
    SCOPED_TRACE(kv);
    const std::string whole_kv = temp_path("whole.kv"), resumed_kv = temp_path("resumed.kv");
    const auto whole = testing_cli::run_cli(ingest_args(clip, kv, whole_kv));
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    EXPECT_EQ(frames_encoded(whole.err), 16) << whole.err;
    EXPECT_NE(whole.err.find("checkpoint: frame 4/16"), std::string::npos) << whole.err;
    EXPECT_FALSE(exists(whole_kv + ".part")) << "a complete ingest removes its checkpoint";

    const auto stopped = testing_cli::run_cli(plus(ingest_args(clip, kv, resumed_kv), {"--stop-after-frames", "8"}));
    EXPECT_EQ(stopped.exit_code, 130) << stopped.err;
    EXPECT_NE(stopped.err.find("interrupted at frame 8 of 16"), std::string::npos) << stopped.err;
    EXPECT_NE(stopped.err.find("--resume"), std::string::npos) << stopped.err;
    EXPECT_TRUE(stopped.out.empty()) << stopped.out;
    EXPECT_FALSE(exists(resumed_kv)) << "nothing saved but the checkpoint";
    ASSERT_TRUE(exists(resumed_kv + ".part"));

    const auto resumed = testing_cli::run_cli(plus(ingest_args(clip, kv, resumed_kv), {"--resume"}));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_NE(resumed.err.find("resuming from " + resumed_kv + ".part"), std::string::npos) << resumed.err;
    EXPECT_NE(resumed.err.find("from the checkpoint"), std::string::npos) << resumed.err;
    EXPECT_EQ(frames_encoded(resumed.err), 8) << "only the frames after the checkpoint: " << resumed.err;
    EXPECT_EQ(resumed.out, whole.out);
    const std::string a = read_file(whole_kv), b = read_file(resumed_kv);
    EXPECT_GT(a.size(), 1000u);
    EXPECT_TRUE(a == b) << "the saved files differ (" << a.size() << " and " << b.size() << " bytes)";
    EXPECT_FALSE(exists(resumed_kv + ".part"));
    for (const std::string& p : {whole_kv, resumed_kv}) std::remove(p.c_str());
  }
  std::remove(clip.c_str());
}

// The child's exit status after SIGINT once its first checkpoint line is on stderr.
struct Interrupted {
  int exit_code = -1;
  std::string err;
};
Interrupted interrupt_after_first_checkpoint(const std::vector<std::string>& args) {
  Interrupted r;
  int err_pipe[2];
  if (pipe(err_pipe) != 0) return r;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(err_pipe[1], STDERR_FILENO);
    const int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, STDOUT_FILENO);
    close(err_pipe[0]);
    std::vector<char*> argv;
    std::string exe = VLKV_CLI_PATH;
    argv.push_back(exe.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  close(err_pipe[1]);
  bool sent = false;
  char buf[4096];
  ssize_t n;
  while ((n = read(err_pipe[0], buf, sizeof buf)) > 0) {
    r.err.append(buf, static_cast<size_t>(n));
    if (!sent && r.err.find("checkpoint: frame") != std::string::npos) {
      kill(pid, SIGINT);
      sent = true;
    }
  }
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return r;
}

TEST(CliIngestResume, CtrlCWritesACheckpointAtTheNextFrameAndResumeFinishesIt) {
  const std::string clip = make_clip(40, "long.mp4");
  ASSERT_FALSE(clip.empty());
  const std::string whole_kv = temp_path("sig_whole.kv"), resumed_kv = temp_path("sig_resumed.kv");
  std::vector<std::string> args = ingest_args(clip, "kivi2", whole_kv);
  args.back() = "2";  // --checkpoint-every 2: the first line comes early
  const auto whole = testing_cli::run_cli(args);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  args[args.size() - 3] = resumed_kv;  // --save-kv
  const Interrupted stopped = interrupt_after_first_checkpoint(args);
  ASSERT_EQ(stopped.exit_code, 130) << stopped.err;
  EXPECT_NE(stopped.err.find("Ctrl-C: stopping at the next frame"), std::string::npos) << stopped.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(stopped.err, m, std::regex("interrupted at frame ([0-9]+) of 40"))) << stopped.err;
  const long at = std::stol(m[1]);
  EXPECT_GE(at, 2);
  EXPECT_LT(at, 40);
  const auto resumed = testing_cli::run_cli(plus(args, {"--resume"}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(frames_encoded(resumed.err), 40 - at) << resumed.err;
  EXPECT_EQ(resumed.out, whole.out);
  EXPECT_TRUE(read_file(whole_kv) == read_file(resumed_kv)) << "the saved files differ";
  for (const std::string& p : {whole_kv, resumed_kv, clip}) std::remove(p.c_str());
}

TEST(CliIngestResume, AnotherIngestsOrADamagedCheckpointIsRefused) {
  const std::string clip = make_clip(16, "refused.mp4");
  const std::string other_clip = make_clip(15, "other.mp4");  // 15 frames: another file and plan
  ASSERT_FALSE(clip.empty());
  ASSERT_FALSE(other_clip.empty());
  const std::string kv = temp_path("refused.kv"), part = kv + ".part";
  const auto stopped = testing_cli::run_cli(plus(ingest_args(clip, "kivi2", kv), {"--stop-after-frames", "8"}));
  ASSERT_EQ(stopped.exit_code, 130) << stopped.err;
  ASSERT_TRUE(exists(part));
  const std::string bytes = read_file(part);
  auto refused = [&](const std::vector<std::string>& args, const std::string& why) {
    const auto r = testing_cli::run_cli(plus(args, {"--resume"}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_TRUE(read_file(part) == bytes) << "a refused resume leaves the checkpoint as it was";
  };
  refused(ingest_args(clip, "kivi2", kv, "What color was the square at 29.0 s?"), "another ingest: its prompt is");
  refused(ingest_args(clip, "f16", kv), "it holds KV method kivi");
  refused(ingest_args(other_clip, "kivi2", kv), "another ingest: its video 1 file is");
  refused(plus(ingest_args(clip, "kivi2", kv), {"--batch-size", "64"}), "made with --batch-size 512");
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x04;
  std::ofstream(part, std::ios::binary | std::ios::trunc).write(flipped.data(), static_cast<std::streamsize>(flipped.size()));
  const auto bad = testing_cli::run_cli(plus(ingest_args(clip, "kivi2", kv), {"--resume"}));
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("bad checksum of section"), std::string::npos) << bad.err;
  std::ofstream(part, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 100));
  const auto cut = testing_cli::run_cli(plus(ingest_args(clip, "kivi2", kv), {"--resume"}));
  EXPECT_EQ(cut.exit_code, 2) << cut.err;
  EXPECT_NE(cut.err.find("truncated"), std::string::npos) << cut.err;
  // A checkpoint asked about with --load-kv: refused, pointing at --resume.
  std::ofstream(part, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const auto loaded = testing_cli::run_cli({"run", "-m", models() + "tinyvideo.gguf", "--mmproj",
                                            models() + "tinyvideo-mmproj.gguf", "--load-kv", part, "-p", "Hi",
                                            "--kv", "kivi2"});
  EXPECT_EQ(loaded.exit_code, 2) << loaded.err;
  EXPECT_NE(loaded.err.find("an ingest checkpoint"), std::string::npos) << loaded.err;
  // Flags that cannot checkpoint.
  const auto no_path = testing_cli::run_cli({"run", "-m", models() + "tinyvideo.gguf", "--mmproj",
                                             models() + "tinyvideo-mmproj.gguf", "--video", clip, "--fps", "2",
                                             "-p", "Hi", "--checkpoint-every", "4"});
  EXPECT_EQ(no_path.exit_code, 2) << no_path.err;
  EXPECT_NE(no_path.err.find("--checkpoint FILE"), std::string::npos) << no_path.err;
  const auto same = testing_cli::run_cli(plus(ingest_args(clip, "kivi2", kv), {"--checkpoint", kv}));
  EXPECT_EQ(same.exit_code, 2) << same.err;
  EXPECT_NE(same.err.find("name the same file"), std::string::npos) << same.err;
  for (const std::string& p : {part, kv, clip, other_clip}) std::remove(p.c_str());
}

}  // namespace
}  // namespace vlkv
