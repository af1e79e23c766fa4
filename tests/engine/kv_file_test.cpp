// KV files (docs/kv_file.md): a conversation saved after a turn and loaded into a new one
// answers the next question byte for byte as the one that never left memory, for f16 and
// every registered compressed method, on stories260K (text) and on tinyvlm-shapes with an
// image; a loaded session's next logits equal the original's bit for bit; every corruption,
// truncation and mismatch (model, method, mmproj) is refused with its message.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <fstream>
#include <future>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "engine/kv_file.h"
#include "gguf/gguf_reader.h"
#include "kv/method_registry.h"
#include "vlkv/conversation.h"
#include "vlkv/engine.h"

namespace vlkv {
namespace {

const std::string kModels = std::string(VLKV_SOURCE_DIR) + "/models/";
const std::string kTinyData = std::string(VLKV_TEST_DATA) + "/vlm/tinyvlm/";

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "vlkv_kv_file_" + std::to_string(::getpid()) + "_" + name;
}

std::unique_ptr<Engine> load_engine(const std::string& model, const std::string& mmproj, const std::string& kv = "f16") {
  EngineParams p;
  p.model_path = kModels + model;
  if (!mmproj.empty()) p.mmproj_path = kModels + mmproj;
  p.kv_method = kv;
  p.kv_budget_bytes = 64ull << 20;
  p.n_threads = 1;
  p.n_ctx = 512;
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

GenerateParams greedy(int64_t n) {
  GenerateParams g;
  g.max_tokens = n;
  g.sampling.temperature = 0;
  return g;
}

std::string ask(Conversation& c, const std::string& message, std::vector<MediaItem> media, int64_t n) {
  std::string out;
  const Status s = c.ask(message, std::move(media), greedy(n), [&](const std::string& p) { out += p; return true; }, nullptr);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return out;
}

MediaItem shapes_image() {
  Result<Image> img = load_image(kTinyData + "images/000.png");
  EXPECT_TRUE(img.is_ok()) << img.status().message();
  MediaItem m;
  if (img.is_ok()) m.frames.push_back(std::move(img).value());
  return m;
}

// Every registered method with its defaults, plus spellings whose windows are small enough
// that these short conversations fold tokens into the compressed segments.
std::vector<std::string> method_specs() {
  std::vector<std::string> specs;
  for (const MethodInfo* m : list_methods()) specs.push_back(m->name);
  for (const char* s : {"kivi2:residual=0", "kivi:bits=4,residual=8,g=8", "vidkv:window=8,g=8", "zipvl:rescore=8"})
    specs.push_back(s);
  return specs;
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void expect_bit_identical(Engine& engine, const std::string& spec);

// Saved after turn 1, loaded, turn 2: the same answer as without the file. Counts in ran
// the specs that ran (a method whose geometry the model refuses is skipped, and named).
void round_trips(Engine& e, bool use_template, const std::string& first, std::vector<MediaItem> media,
                 const std::string& second, std::vector<std::string>* skipped, int* ran) {
  for (const std::string& spec : method_specs()) {
    SCOPED_TRACE(spec);
    ConversationOptions o;
    o.kv_method = spec;
    o.use_template = use_template;
    Result<std::unique_ptr<Conversation>> a = Conversation::start(e, o);
    if (!a.is_ok()) {  // e.g. a group size that does not divide stories260K's head_dim of 8
      skipped->push_back(spec + ": " + a.status().message());
      continue;
    }
    ++*ran;
    const std::string path = tmp_path("rt.kv");
    ask(**a, first, media, 12);
    const int64_t n_saved = (*a)->session().n_past();
    ASSERT_TRUE((*a)->save(path).is_ok());
    const std::string expected = ask(**a, second, {}, 24);
    Result<std::unique_ptr<Conversation>> b = Conversation::load(e, path, spec);
    ASSERT_TRUE(b.is_ok()) << b.status().message();
    EXPECT_EQ((*b)->session().n_past(), n_saved);
    EXPECT_EQ((*b)->turns().size(), 2u);
    EXPECT_EQ((*b)->session().kv_description(), (*a)->session().kv_description());
    EXPECT_EQ(ask(**b, second, {}, 24), expected);
    std::remove(path.c_str());
  }
}

TEST(KvFile, ConversationRoundTripEveryMethodStories260K) {
  std::unique_ptr<Engine> e = load_engine("stories260K.gguf", "");
  ASSERT_TRUE(e);
  std::vector<std::string> skipped;
  int ran = 0;
  round_trips(*e, false, "Once upon a time there was a little girl named Lily. She", {}, " One day", &skipped, &ran);
  for (const std::string& s : skipped) std::printf("skipped on stories260K: %s\n", s.c_str());
  EXPECT_GE(ran, 10);
}

TEST(KvFile, ConversationRoundTripEveryMethodTinyvlmImage) {
  std::unique_ptr<Engine> e = load_engine("tinyvlm-shapes.gguf", "tinyvlm-shapes-mmproj.gguf");
  ASSERT_TRUE(e);
  std::vector<std::string> skipped;
  int ran = 0;
  round_trips(*e, true, "How many shapes are there?", {shapes_image()}, "Describe the image.", &skipped, &ran);
  for (const std::string& s : skipped) std::printf("skipped on tinyvlm: %s\n", s.c_str());
  EXPECT_EQ(skipped.size(), 0u);
  EXPECT_GE(ran, 13);
}

// Session level (vlkv run --save-kv / --load-kv): the loaded session's logits for the next
// tokens are the original's, bit for bit (same codec bytes, same state, same positions), for
// every method; and a file saved from a loaded session is the same file.
TEST(KvFile, LoadedSessionGivesBitIdenticalLogits) {
  std::unique_ptr<Engine> e = load_engine("tinyvlm-shapes.gguf", "tinyvlm-shapes-mmproj.gguf");
  ASSERT_TRUE(e);
  for (const std::string& spec : method_specs()) {
    SCOPED_TRACE(spec);
    expect_bit_identical(*e, spec);
  }
}

void expect_bit_identical(Engine& engine, const std::string& spec) {
  Engine* e = &engine;
  Result<std::unique_ptr<Session>> a = e->new_session(spec);
  ASSERT_TRUE(a.is_ok());
  Result<PreparedPrompt> p = e->prepare_prompt(e->user_prompt("Where is the red square?", {shapes_image()}, true), true);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  std::vector<float> la, lb;
  ASSERT_TRUE((*a)->eval_prompt(*p, &la).is_ok());
  const std::string path = tmp_path("session.kv");
  ASSERT_TRUE((*a)->save_kv(path).is_ok());
  Result<std::unique_ptr<Session>> b = e->load_session(path, spec);
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ((*b)->n_past(), (*a)->n_past());
  EXPECT_EQ((*b)->kv_stored_bytes(), (*a)->kv_stored_bytes());
  for (int32_t t : {5, 17, 3}) {
    ASSERT_TRUE((*a)->eval({t}, false, &la).is_ok());
    ASSERT_TRUE((*b)->eval({t}, false, &lb).is_ok());
    ASSERT_EQ(la.size(), lb.size());
    EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0);
  }
  std::vector<int32_t> text(40);  // a longer step: windows fold, stagings fill
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<int32_t>(20 + 7 * i % 300);
  ASSERT_TRUE((*a)->eval(text, false, &la).is_ok());
  ASSERT_TRUE((*b)->eval(text, false, &lb).is_ok());
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0);
  // A file saved from a loaded session is the same file.
  const std::string again = tmp_path("session2.kv");
  Result<std::unique_ptr<Session>> c = e->load_session(path, spec);
  ASSERT_TRUE(c.is_ok());
  ASSERT_TRUE((*c)->save_kv(again).is_ok());
  const std::string first_bytes = read_all(path), again_bytes = read_all(again);
  EXPECT_TRUE(first_bytes == again_bytes) << "a loaded session saves another file (" << first_bytes.size() << " vs "
                                          << again_bytes.size() << " bytes)";
  std::remove(path.c_str());
  std::remove(again.c_str());
}

class KvFileCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    e_ = load_engine("stories260K.gguf", "", "kivi2:residual=0");
    ASSERT_TRUE(e_);
    ConversationOptions o;
    o.use_template = false;
    Result<std::unique_ptr<Conversation>> c = Conversation::start(*e_, o);
    ASSERT_TRUE(c.is_ok());
    ask(**c, "Once upon a time there was a little dog", {}, 30);
    path_ = tmp_path("good.kv");
    ASSERT_TRUE((*c)->save(path_).is_ok());
    good_ = read_all(path_);
    ASSERT_GT(good_.size(), 1000u);
  }
  void TearDown() override {
    std::remove(path_.c_str());
    std::remove(bad_path().c_str());
  }
  std::string bad_path() const { return tmp_path("bad.kv"); }
  // Loading these bytes fails with a message holding `expected` (and the file's name).
  void expect_refused(const std::string& bytes, const std::string& expected, const std::string& kv = "") {
    write_all(bad_path(), bytes);
    Result<std::unique_ptr<Conversation>> c = Conversation::load(*e_, bad_path(), kv);
    ASSERT_FALSE(c.is_ok()) << "accepted: " << expected;
    EXPECT_NE(c.status().message().find(expected), std::string::npos) << c.status().message();
    EXPECT_EQ(c.status().message().find('\n'), std::string::npos) << "one line";
    EXPECT_NE(c.status().message().find(bad_path()), std::string::npos) << c.status().message();
    EXPECT_EQ(e_->kv_bytes_in_use(), 0u) << "a refused file left pages behind";
  }
  // Section i's offset and size from the table.
  std::pair<uint64_t, uint64_t> section(size_t i) const {
    uint64_t off = 0, size = 0;
    std::memcpy(&off, good_.data() + kKvFileHeaderBytes + i * kKvFileEntryBytes + 8, 8);
    std::memcpy(&size, good_.data() + kKvFileHeaderBytes + i * kKvFileEntryBytes + 16, 8);
    return {off, size};
  }
  uint32_t n_sections() const {
    uint32_t n = 0;
    std::memcpy(&n, good_.data() + 12, 4);
    return n;
  }
  std::unique_ptr<Engine> e_;
  std::string path_, good_;
};

TEST_F(KvFileCorruption, TheGoodFileLoads) {
  Result<std::unique_ptr<Conversation>> c = Conversation::load(*e_, path_);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_GT(e_->kv_bytes_in_use(), 0u);
}

TEST_F(KvFileCorruption, EveryHeaderFieldFlipped) {
  struct Field {
    size_t offset;
    uint8_t flip;
    const char* expected;
  };
  const Field fields[] = {{0, 0x01, "bad magic"},
                          {7, 0x01, "bad magic"},
                          {8, 0x01, "version"},
                          {12, 0x80, "section count"},             // 134 sections
                          {12, 0x01, "bad checksum of the header"},  // 7: in range, caught by the checksum
                          {16, 0x01, "truncated or extended"},
                          {23, 0x01, "truncated or extended"},
                          {24, 0x01, "bad checksum of the header"},
                          {28, 0x01, "bad checksum of the header"}};
  for (const Field& f : fields) {
    SCOPED_TRACE(f.offset);
    std::string b = good_;
    b[f.offset] ^= f.flip;
    expect_refused(b, f.expected);
  }
  // Each field of each section table entry: the header checksum covers the table.
  for (size_t i = 0; i < n_sections(); ++i)
    for (size_t at : {0, 4, 8, 16}) {
      std::string b = good_;
      b[kKvFileHeaderBytes + i * kKvFileEntryBytes + at] ^= 0x01;
      expect_refused(b, "bad checksum of the header");
    }
  EXPECT_EQ(n_sections(), 6u);  // identity, method, tokens, media, kv, conversation
}

TEST_F(KvFileCorruption, OlderFormatVersionRefusedWithItsReason) {
  // Version 1 identified models by a CRC32: its identities cannot match version 2's SHA-256.
  std::string b = good_;
  const uint32_t v1 = 1;
  std::memcpy(b.data() + 8, &v1, sizeof v1);
  expect_refused(b, "KV file version 1, written by an older vlkv; this vlkv reads version 2");
}

TEST_F(KvFileCorruption, EverySectionsChecksum) {
  const char* names[] = {"identity", "method", "tokens", "media", "kv", "conversation"};
  for (size_t i = 0; i < n_sections(); ++i) {
    auto [off, size] = section(i);
    if (size == 0) continue;
    for (uint64_t at : {off, off + size / 2, off + size - 1}) {
      std::string b = good_;
      b[at] ^= 0x40;
      expect_refused(b, std::string("bad checksum of section ") + names[i]);
    }
  }
}

TEST_F(KvFileCorruption, TruncatedAtManyOffsets) {
  std::vector<size_t> cuts;
  for (size_t n = 0; n < 200; ++n) cuts.push_back(n);
  for (size_t n = 200; n < good_.size(); n += good_.size() / 97 + 1) cuts.push_back(n);
  cuts.push_back(good_.size() - 1);
  for (size_t n : cuts) {
    SCOPED_TRACE(n);
    expect_refused(good_.substr(0, n), "truncated");
  }
  expect_refused(good_ + "x", "truncated or extended");
}

TEST_F(KvFileCorruption, WrongMethodModelAndMmproj) {
  expect_refused(good_, "holds KV method kivi2:", "f16");
  std::unique_ptr<Engine> vlm = load_engine("tinyvlm-shapes.gguf", "tinyvlm-shapes-mmproj.gguf", "kivi2:residual=0");
  ASSERT_TRUE(vlm);
  write_all(bad_path(), good_);
  Result<std::unique_ptr<Conversation>> c = Conversation::load(*vlm, bad_path());
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("saved from another model"), std::string::npos) << c.status().message();

  // A file whose cache holds an image, loaded with another mmproj (the same file with one
  // tensor byte changed: same layout, other weights) or with none.
  ConversationOptions o;
  Result<std::unique_ptr<Conversation>> a = Conversation::start(*vlm, o);
  ASSERT_TRUE(a.is_ok());
  ask(**a, "How many shapes are there?", {shapes_image()}, 8);
  const std::string with_image = tmp_path("image.kv");
  ASSERT_TRUE((*a)->save(with_image).is_ok());
  const std::string other_mm = tmp_path("other-mmproj.gguf");
  std::string mm = read_all(kModels + "tinyvlm-shapes-mmproj.gguf");
  {  // one byte of the first tensor's data (within what the identity samples)
    Result<std::unique_ptr<GgufFile>> g = GgufFile::open(kModels + "tinyvlm-shapes-mmproj.gguf");
    ASSERT_TRUE(g.is_ok());
    mm[(*g)->data_offset() + (*g)->tensors()[0].offset + 1] ^= 0x01;
  }
  write_all(other_mm, mm);
  EngineParams p;
  p.model_path = kModels + "tinyvlm-shapes.gguf";
  p.mmproj_path = other_mm;
  p.kv_method = "kivi2:residual=0";
  p.kv_budget_bytes = 64ull << 20;
  Result<std::unique_ptr<Engine>> vlm2 = Engine::load(p);
  ASSERT_TRUE(vlm2.is_ok()) << vlm2.status().message();
  Result<std::unique_ptr<Conversation>> d = Conversation::load(**vlm2, with_image);
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("encoded by another mmproj"), std::string::npos) << d.status().message();
  p.mmproj_path = "";
  Result<std::unique_ptr<Engine>> text_only = Engine::load(p);
  ASSERT_TRUE(text_only.is_ok());
  d = Conversation::load(**text_only, with_image);
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("load the same --mmproj"), std::string::npos) << d.status().message();
  std::remove(with_image.c_str());
  std::remove(other_mm.c_str());
}

TEST_F(KvFileCorruption, OverTheKvBudget) {
  EngineParams p;
  p.model_path = kModels + "stories260K.gguf";
  p.kv_method = "kivi2:residual=0";
  p.kv_budget_bytes = 4096;
  p.n_ctx = 512;
  Result<std::unique_ptr<Engine>> small = Engine::load(p);
  ASSERT_TRUE(small.is_ok()) << small.status().message();
  Result<std::unique_ptr<Conversation>> c = Conversation::load(**small, path_);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kOutOfMemory);
  EXPECT_NE(c.status().message().find("raise --kv-budget"), std::string::npos) << c.status().message();
}

// A session file (no conversation section) is not a conversation, and a conversation after
// loading refuses /kv (it holds no media pixels) only where a turn had media.
TEST_F(KvFileCorruption, SessionFileIsNotAConversation) {
  Result<std::unique_ptr<Session>> s = e_->new_session();
  ASSERT_TRUE(s.is_ok());
  std::vector<float> logits;
  ASSERT_TRUE((*s)->eval({1, 2, 3}, false, &logits).is_ok());
  ASSERT_TRUE((*s)->save_kv(bad_path()).is_ok());
  Result<std::unique_ptr<Conversation>> c = Conversation::load(*e_, bad_path());
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("no conversation"), std::string::npos) << c.status().message();
  Result<std::unique_ptr<Conversation>> good = Conversation::load(*e_, path_);
  ASSERT_TRUE(good.is_ok());
  EXPECT_TRUE((*good)->switch_kv_method("f16").is_ok());  // text only: evaluated again from its texts
}

// Hostile files (issue 38): what sits at a path, and what a small file declares, cannot make a
// load wait forever, take memory it does not hold, or make a save write through something else.

// This process's peak resident set (VmHWM) since reset_own_peak().
uint64_t own_peak_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  return 0;
}
uint64_t own_resident_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  return 0;
}
void reset_own_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

// A FIFO given to load is refused at once (it blocked forever in open(), waiting for a
// writer). Should the load still block, the test opens the FIFO for writing to let it end.
TEST_F(KvFileCorruption, FifoRefusedWithoutWaiting) {
  const std::string fifo = tmp_path("fifo.kv");
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto loading = std::async(std::launch::async, [&] { return Conversation::load(*e_, fifo).status(); });
  const bool returned = loading.wait_for(std::chrono::seconds(3)) == std::future_status::ready;
  if (!returned) {
    const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);
  }
  const Status st = loading.get();
  EXPECT_TRUE(returned) << "loading a FIFO blocked";
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find(fifo + ": not a regular file (a FIFO)"), std::string::npos) << st.message();
  std::remove(fifo.c_str());
}

// A save replaces a regular file and nothing else: a FIFO or a symbolic link at the target is
// refused and left as it was (a save replaced /dev/full with a regular file).
TEST_F(KvFileCorruption, SaveRefusesATargetThatIsNotARegularFile) {
  Result<std::unique_ptr<Conversation>> c = Conversation::load(*e_, path_);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const std::string fifo = tmp_path("target_fifo.kv");
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Status st = (*c)->save(fifo);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("it is a FIFO, not a regular file"), std::string::npos) << st.message();
  struct stat sb;
  ASSERT_EQ(::lstat(fifo.c_str(), &sb), 0);
  EXPECT_TRUE(S_ISFIFO(sb.st_mode)) << "the FIFO was replaced";
  std::remove(fifo.c_str());

  const std::string victim = tmp_path("victim"), link = tmp_path("target_link.kv");
  write_all(victim, "victim");
  std::remove(link.c_str());
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  st = (*c)->save(link);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("symbolic link"), std::string::npos) << st.message();
  EXPECT_EQ(read_all(victim), "victim");
  ASSERT_EQ(::lstat(link.c_str(), &sb), 0);
  EXPECT_TRUE(S_ISLNK(sb.st_mode));
  std::remove(link.c_str());
  std::remove(victim.c_str());
}

// The temporary a save writes first has a fresh name (mkstemp): a symbolic link planted at
// PATH.tmp (which `--save-kv PATH` wrote through, overwriting the link's target) is untouched.
TEST_F(KvFileCorruption, PlantedTemporaryIsNotFollowed) {
  Result<std::unique_ptr<Conversation>> c = Conversation::load(*e_, path_);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const std::string out = tmp_path("out.kv"), victim = tmp_path("victim2");
  write_all(victim, "victim");
  std::remove((out + ".tmp").c_str());
  ASSERT_EQ(::symlink(victim.c_str(), (out + ".tmp").c_str()), 0);
  ASSERT_TRUE((*c)->save(out).is_ok());
  EXPECT_EQ(read_all(victim), "victim");
  EXPECT_TRUE(read_all(out) == good_);
  struct stat sb;
  ASSERT_EQ(::stat(out.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0666 & ~[] { const mode_t m = ::umask(0); ::umask(m); return m; }());
  // Saving again replaces the file in place; nothing else is left in the folder.
  ASSERT_TRUE((*c)->save(out).is_ok());
  EXPECT_TRUE(read_all(out) == good_);
  for (const std::string& p : {out, out + ".tmp", victim}) std::remove(p.c_str());
}

// The tokens section with its sections' checksums made right again, next_pos or a row's
// position replaced: INT64_MAX was accepted, and the next token's position overflowed.
TEST_F(KvFileCorruption, PositionsNearOverflowRefused) {
  auto with_tokens = [&](auto edit) {
    Result<std::vector<KvFileSectionView>> views =
        parse_kv_file(reinterpret_cast<const uint8_t*>(good_.data()), good_.size());
    EXPECT_TRUE(views.is_ok());
    std::vector<KvFileSection> sections;
    for (const KvFileSectionView& v : *views) {
      KvFileSection s{v.id, std::string(reinterpret_cast<const char*>(v.data), v.size)};
      if (v.id == kSectionTokens) edit(s.bytes);
      sections.push_back(std::move(s));
    }
    return build_kv_file(sections);
  };
  const int64_t huge = INT64_MAX;
  // tokens: n_past (i64), next_pos (i64), ids (u64 count + i32s), kinds, pos, mrope
  expect_refused(with_tokens([&](std::string& b) { std::memcpy(b.data() + 8, &huge, 8); }),
                 "the next position 9223372036854775807 is out of range");
  expect_refused(with_tokens([&](std::string& b) {
                   int64_t n = 0;
                   std::memcpy(&n, b.data(), 8);
                   const size_t pos_at = 16 + 8 + 4 * n + 8 + n + 8;  // the first row's position
                   std::memcpy(b.data() + pos_at, &huge, 8);
                 }),
                 "token 0 has a position out of range");
  expect_refused(with_tokens([&](std::string& b) { const int64_t minus = -2; std::memcpy(b.data() + 8, &minus, 8); }),
                 "out of range");
}

// A sparse file of 512 MiB whose header's checksum is wrong: it was read whole (and held)
// before the checksum was checked; now the header is checked first.
TEST(KvFileHostile, BadHeaderOfAHugeFileRefusedBeforeReading) {
  EngineParams p;
  p.model_path = kModels + "stories260K.gguf";
  p.kv_budget_bytes = 1ull << 30;  // files up to ~1 GiB may be read: the pages are taken lazily
  p.n_ctx = 512;
  p.n_threads = 1;
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  const std::string path = tmp_path("sparse.kv");
  const uint64_t size = 512ull << 20;
  std::string head(kKvFileHeaderBytes + kKvFileEntryBytes, '\0');
  std::memcpy(head.data(), kKvFileMagic, sizeof kKvFileMagic);
  const uint32_t version = kKvFileVersion, n = 1, crc = 0x12345678;
  std::memcpy(head.data() + 8, &version, 4);
  std::memcpy(head.data() + 12, &n, 4);
  std::memcpy(head.data() + 16, &size, 8);
  std::memcpy(head.data() + 24, &crc, 4);
  write_all(path, head);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(size)), 0);
  reset_own_peak();
  const uint64_t before = own_resident_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::unique_ptr<Conversation>> c = Conversation::load(**e, path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t peak = own_peak_bytes();
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("bad checksum of the header"), std::string::npos) << c.status().message();
  EXPECT_LT(seconds, 1.0);
  EXPECT_LT(peak, before + (64u << 20)) << before << " -> peak " << peak;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace vlkv
