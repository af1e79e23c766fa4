// `vlkv chat` on a terminal (a pseudo-terminal here): Up recalls the previous message
// (libedit's history, instead of typing ^[[A into the message) and the history is kept
// in $XDG_STATE_HOME/vlkv/chat_history, readable by its owner alone. (Keys sent before
// libedit has the terminal in raw mode are echoed by the terminal as ^[[A, but still
// reach libedit: the history file, not the echo, shows what the message was.)
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace vlkv {
namespace {

const std::string kModel = std::string(VLKV_TEST_DATA) + "/fixtures/models/stories260K.gguf";

// Reads what the child writes to the terminal until `want` has appeared `count` times (or
// 30 s pass: a loaded machine's model load and answers take well under a second each).
bool read_until(int fd, std::string& seen, const std::string& want, int count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    int found = 0;
    for (size_t at = seen.find(want); at != std::string::npos; at = seen.find(want, at + 1)) ++found;
    if (found >= count) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return false;
    seen.append(buf, static_cast<size_t>(n));
  }
}

TEST(CliChatTty, UpRecallsThePreviousMessageAndHistoryIsKept) {
  const std::string state = ::testing::TempDir() + "vlkv_chat_tty_" + std::to_string(::getpid());
  std::filesystem::create_directories(state);
  int fd = -1;
  const pid_t pid = ::forkpty(&fd, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("XDG_STATE_HOME", state.c_str(), 1);
    ::setenv("TERM", "xterm", 1);
    ::execl(VLKV_CLI_PATH, "vlkv", "chat", "-m", kModel.c_str(), "--no-template", "--temp", "0", "-n", "4", "-t", "1",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::string seen;
  ASSERT_TRUE(read_until(fd, seen, "> ", 1)) << seen;
  const std::string first = "Once upon a time\r";
  ASSERT_EQ(::write(fd, first.data(), first.size()), static_cast<ssize_t>(first.size()));
  ASSERT_TRUE(read_until(fd, seen, " generated, ", 1)) << seen;  // the first answer's figures
  ASSERT_TRUE(read_until(fd, seen, "> ", 2)) << seen;
  const std::string up = "\x1b[A\r";  // Up, then Enter: the same message again
  ASSERT_EQ(::write(fd, up.data(), up.size()), static_cast<ssize_t>(up.size()));
  ASSERT_TRUE(read_until(fd, seen, " generated, ", 2)) << seen;
  ASSERT_TRUE(read_until(fd, seen, "> ", 3)) << seen;
  const std::string stats = "/stats\r";
  ASSERT_EQ(::write(fd, stats.data(), stats.size()), static_cast<ssize_t>(stats.size()));
  ASSERT_TRUE(read_until(fd, seen, " messages, ", 1)) << seen;
  EXPECT_NE(seen.find("4 messages, "), std::string::npos) << seen;  // two questions, two answers
  const std::string quit = "/quit\r";
  ASSERT_EQ(::write(fd, quit.data(), quit.size()), static_cast<ssize_t>(quit.size()));
  int status = 0;
  bool exited = false;
  for (int i = 0; i < 1000 && !(exited = ::waitpid(pid, &status, WNOHANG) == pid); ++i) {
    pollfd p{fd, POLLIN, 0};  // keep reading, so that the terminal's buffer never fills
    char buf[4096];
    if (::poll(&p, 1, 10) > 0 && ::read(fd, buf, sizeof buf) <= 0) ::usleep(10000);
  }
  ::close(fd);
  if (!exited) ::kill(pid, SIGKILL), ::waitpid(pid, &status, 0);
  ASSERT_TRUE(exited && WIFEXITED(status)) << seen;
  EXPECT_EQ(WEXITSTATUS(status), 0) << seen;

  const std::string history = state + "/vlkv/chat_history";
  std::ifstream h(history);
  const std::string text((std::istreambuf_iterator<char>(h)), std::istreambuf_iterator<char>());
  // libedit's file format (a _HiStOrY_V2_ header, spaces written as \040), which it reads back.
  // Up recalled the message itself: it is there twice, and no escape sequence went into it.
  const std::string line = "\nOnce\\040upon\\040a\\040time\n";
  const size_t first_at = text.find(line);
  ASSERT_NE(first_at, std::string::npos) << text;
  EXPECT_NE(text.find(line, first_at + 1), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  struct stat st {};
  ASSERT_EQ(::stat(history.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u);  // what was typed stays the owner's
  std::filesystem::remove_all(state);
}

}  // namespace
}  // namespace vlkv
