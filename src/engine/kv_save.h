// Sessions to KV files and back (docs/kv_file.md): what a Session records of the rows it
// fed (so a file says which tokens its cache holds), the model's identity, and the reading
// and writing of a session's sections. Not public API: Session::save_kv, Engine::load_session
// and Conversation::save / load call it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_impl.h"
#include "vlkv/engine.h"

namespace vlkv {

// One media item a session fed: its content hash (media_content_hash) and its rows.
struct MediaRecord {
  uint64_t hash = 0;
  int64_t first_row = 0, n_rows = 0;
  int32_t grid_t = 1, grid_h = 0, grid_w = 0;  // PromptChunk's grid
};

// Every row a session's cache holds, in order, as it was fed to the decoder.
struct SessionHistory {
  std::vector<int32_t> ids;     // [n_past] token ids (0 for a media row)
  std::vector<uint8_t> kinds;   // [n_past] TokenKind
  std::vector<int64_t> pos;     // [n_past] RoPE positions
  std::vector<int64_t> mrope;   // [n_past, 3] M-RoPE (t, h, w) of media rows; -1 elsewhere
  std::vector<MediaRecord> media;
  bool synthetic = false;       // fill_kv_for_benchmark stored rows with no tokens: not savable
};

// Sections every KV file image holds (sessions, and the prefix cache's shared entries):
// the model's identity (the mmproj's too when with_mmproj and the engine has one) and the
// method. The checks return the one line that refuses another model, mmproj, method, or
// more pages than the free KV budget; check_method_section returns the stored spec.
std::string identity_section(const Engine::Impl& e, bool with_mmproj);
Status check_identity_section(const Engine::Impl& e, const uint8_t* data, size_t size);
std::string method_section(const std::string& spec, uint64_t page_bytes);
Result<std::string> check_method_section(Engine::Impl& e, const uint8_t* data, size_t size, const std::string& kv_method);

// Session's private state for the file code (Session befriends it).
struct SessionFile {
  // Writes one session's file to path (conversation, checkpoint: extra sections, or null), its
  // cache streamed from the pages (KvFileWriter); path is replaced only when the file is whole.
  // Returns the file's size.
  static Result<uint64_t> write(const Session& s, const std::string* conversation, const std::string& path,
                                const std::string* checkpoint = nullptr);
  // A new session of engine e from a file image; kv_method "": the engine's. conversation
  // (may be null) receives the conversation section ("" when the file has none); checkpoint
  // the checkpoint section likewise, and when null a checkpoint is refused (its cache holds
  // half a prompt: only Engine::resume_session continues it).
  static Result<std::unique_ptr<Session>> load(Engine::Impl& e, const uint8_t* data, size_t size,
                                               const std::string& kv_method, std::string* conversation,
                                               std::string* checkpoint = nullptr);
  // The largest file a session of e may read: its KV budget plus what the token records take.
  static uint64_t max_file_bytes(const Engine::Impl& e);
  static SessionHistory& history(Session& s);
};

}  // namespace vlkv
