// A fuzz target's LLVMFuzzerTestOneInput on given files, one call each, as libFuzzer runs a
// file argument: `make test-sanitize` replays fuzz/corpus (the regress_* inputs of past finds
// among the seeds) under GCC's ASan + UBSan + LeakSanitizer, and GCC has no libFuzzer.
// Arguments are files or folders (every regular file in one but dot files, in name order). Each input is
// copied to a buffer of exactly its size, so a read past its end hits ASan's redzone.
// Exit 1 when no input was found: a moved corpus must not pass unseen.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::filesystem::path> inputs_of(int argc, char** argv) {
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (!std::filesystem::is_directory(arg)) {
      inputs.push_back(arg);
      continue;
    }
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(arg))
      if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());  // not .gitignore
    std::sort(files.begin(), files.end());
    inputs.insert(inputs.end(), files.begin(), files.end());
  }
  return inputs;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::filesystem::path> inputs = inputs_of(argc, argv);
  if (inputs.empty()) {
    std::fprintf(stderr, "usage: %s FILE_OR_FOLDER...: no input found\n", argv[0]);
    return 1;
  }
  for (const std::filesystem::path& path : inputs) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "cannot read %s\n", path.c_str());
      return 1;
    }
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::unique_ptr<uint8_t[]> data(new uint8_t[bytes.size() + (bytes.empty() ? 1 : 0)]);
    std::copy(bytes.begin(), bytes.end(), data.get());
    // Named before the call: a report or an abort then follows the input's name in the log.
    std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
    std::fflush(stdout);
    LLVMFuzzerTestOneInput(data.get(), bytes.size());
  }
  std::printf("%zu inputs, no report\n", inputs.size());
  return 0;
}
