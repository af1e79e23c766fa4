#include "hub/hub_http.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "hub/hub_file_hash.h"
#include "progress_bar.h"

namespace vlkv::hub {
namespace fs = std::filesystem;
namespace {

constexpr const char* kUserAgent = "vlkv (llama.cpp-compatible -hf)";

void init_curl_once() {
  static const bool done = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  (void)done;
}

struct CurlHandle {
  CURL* curl = curl_easy_init();
  curl_slist* headers = nullptr;
  ~CurlHandle() {
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
  }
  void add_header(const std::string& h) { headers = curl_slist_append(headers, h.c_str()); }
};

// Per-response header state: with redirects, one transfer sees several responses.
struct HeaderState {
  long status = 0;
  std::string etag;
  int64_t range_start = -1;  // from Content-Range
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* st = static_cast<HeaderState*>(user);
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {
    *st = HeaderState{};
    const size_t sp = line.find(' ');
    if (sp != std::string::npos) st->status = std::strtol(line.c_str() + sp + 1, nullptr, 10);
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  const std::string name = lower(line.substr(0, colon));
  std::string value = line.substr(colon + 1);
  while (!value.empty() && value.front() == ' ') value.erase(0, 1);
  if (name == "etag" && st->etag.empty()) st->etag = value;
  if (name == "x-linked-etag") st->etag = value;  // the hub's LFS sha256, before the CDN redirect
  if (name == "content-range" && value.rfind("bytes ", 0) == 0) {
    st->range_start = std::strtoll(value.c_str() + 6, nullptr, 10);
  }
  return size * n;
}

void set_common(CurlHandle& h, const std::string& url, const std::string& token, HeaderState* hs) {
  curl_easy_setopt(h.curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h.curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h.curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(h.curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h.curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h.curl, CURLOPT_USERAGENT, kUserAgent);
  curl_easy_setopt(h.curl, CURLOPT_CONNECTTIMEOUT, 20L);
  // A stalled transfer (under 1 byte/s for a minute) fails and is resumed, never hangs.
  curl_easy_setopt(h.curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h.curl, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(h.curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h.curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h.curl, CURLOPT_HEADERDATA, hs);
  if (!token.empty()) h.add_header("Authorization: Bearer " + token);
}

struct BodySink {
  std::string* body;
  size_t max;
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  const size_t len = size * n;
  if (sink->body->size() + len > sink->max) return 0;  // too large: the transfer fails
  sink->body->append(data, len);
  return len;
}

std::string short_body(const std::string& body) {
  std::string s = body.substr(0, 200);
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return s;
}

// The file being written and what the current response allows into it.
struct FileSink {
  FILE* out = nullptr;
  HeaderState* hs = nullptr;
  int64_t offset = 0;       // bytes already in the file when the request started
  int64_t written = 0;      // bytes of this response written
  bool decided = false;     // the response's status has been looked at
  bool to_file = false;     // 200/206 body: into the file; otherwise kept as the error body
  bool restart = false;     // the server ignored the Range: the file was truncated
  bool write_failed = false;
  std::string error_body;
};

size_t on_file_body(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<FileSink*>(user);
  const size_t len = size * n;
  if (!s->decided) {
    s->decided = true;
    const long st = s->hs->status;
    if (st == 206 && s->hs->range_start == s->offset) {
      s->to_file = true;
    } else if (st == 200) {  // whole file (no Range sent, or the server ignored it): start over
      s->to_file = true;
      if (s->offset > 0) {
        s->restart = true;
        s->offset = 0;
        if (std::fflush(s->out) != 0 || ftruncate(fileno(s->out), 0) != 0 || std::fseek(s->out, 0, SEEK_SET) != 0) {
          s->write_failed = true;
          return 0;
        }
      }
    } else if (st == 206) {
      return 0;  // a range we did not ask for
    }
  }
  if (!s->to_file) {
    if (s->error_body.size() < 4096) s->error_body.append(data, std::min<size_t>(len, 4096));
    return len;
  }
  if (std::fwrite(data, 1, len, s->out) != len) {
    s->write_failed = true;
    return 0;
  }
  s->written += static_cast<int64_t>(len);
  return len;
}

struct ProgressState {
  cli::ProgressBar* bar;
  int64_t offset;
};

int on_progress(void* user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t, curl_off_t) {
  auto* p = static_cast<ProgressState*>(user);
  if (dltotal > 0) p->bar->update("MiB", (p->offset + dlnow) >> 20, (p->offset + dltotal) >> 20);
  return 0;
}

bool is_retryable(long status) { return status == 0 || status == 408 || status == 429 || status >= 500; }

}  // namespace

Status check_token(const std::string& token) {
  if (token.size() > 1024) return invalid_argument("HF_TOKEN / --hf-token: too long for a token");
  for (char c : token) {
    if (c <= 0x20 || c >= 0x7f) return invalid_argument("HF_TOKEN / --hf-token: not a token (spaces or control characters)");
  }
  return Status::ok();
}

Status http_error(const std::string& what, long status, const std::string& body) {
  std::string detail = short_body(body);
  if (!detail.empty()) detail = " (" + detail + ")";
  if (status == 401 || status == 403)
    return invalid_argument(what + ": the hub answered " + std::to_string(status) +
                            ": the repo is gated or private, or the token has no access to it: accept its terms on "
                            "the hub and set HF_TOKEN (or --hf-token)" + detail);
  if (status == 404) return not_found(what + ": not found (404)" + detail);
  return io_error(what + ": the server answered " + std::to_string(status) + detail);
}

HttpReply http_get(const std::string& url, const std::string& token, size_t max_body, bool head_only) {
  init_curl_once();
  HttpReply reply;
  CurlHandle h;
  if (!h.curl) {
    reply.transport_error = "cannot start libcurl";
    return reply;
  }
  HeaderState hs;
  set_common(h, url, token, &hs);
  h.add_header("Accept: application/json");
  curl_easy_setopt(h.curl, CURLOPT_HTTPHEADER, h.headers);
  curl_easy_setopt(h.curl, CURLOPT_TIMEOUT, 120L);
  if (head_only) curl_easy_setopt(h.curl, CURLOPT_NOBODY, 1L);
  BodySink sink{&reply.body, max_body};
  curl_easy_setopt(h.curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h.curl, CURLOPT_WRITEDATA, &sink);
  char err[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h.curl, CURLOPT_ERRORBUFFER, err);
  const CURLcode rc = curl_easy_perform(h.curl);
  if (rc == CURLE_WRITE_ERROR && reply.body.size() + CURL_MAX_WRITE_SIZE > max_body) {
    reply.transport_error = "answer larger than " + std::to_string(max_body) + " bytes";
    return reply;
  }
  if (rc != CURLE_OK) {
    reply.transport_error = *err ? err : curl_easy_strerror(rc);
    return reply;
  }
  curl_easy_getinfo(h.curl, CURLINFO_RESPONSE_CODE, &reply.status);
  reply.etag = hs.etag;
  return reply;
}

namespace {

// The transfer itself, under download_file's lock: up to max_attempts tries, each resuming
// what the partial file holds.
Status transfer_with_retries(const DownloadSpec& spec, const fs::path& partial, std::string* etag) {
  std::error_code ec;
  cli::ProgressBar bar(isatty(2) != 0);
  std::string last_error;
  for (int attempt = 0; attempt < spec.max_attempts; ++attempt) {
    if (attempt > 0) {
      std::fprintf(stderr, "vlkv: %s: %s; resuming\n", spec.label.c_str(), last_error.c_str());
      std::this_thread::sleep_for(std::chrono::seconds(attempt));
    }
    int64_t offset = fs::exists(partial, ec) ? static_cast<int64_t>(fs::file_size(partial, ec)) : 0;
    if (spec.expected_size >= 0 && offset > spec.expected_size) {
      fs::remove(partial, ec);
      offset = 0;
    }
    bool complete = spec.expected_size >= 0 && offset == spec.expected_size && offset > 0;
    if (!complete) {
      std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(partial.c_str(), "ab"), &std::fclose);
      if (!out) return io_error(partial.string() + ": cannot open for writing");
      CurlHandle h;
      if (!h.curl) return io_error("cannot start libcurl");
      HeaderState hs;
      set_common(h, spec.url, spec.token, &hs);
      curl_easy_setopt(h.curl, CURLOPT_HTTPHEADER, h.headers);
      if (offset > 0) curl_easy_setopt(h.curl, CURLOPT_RANGE, (std::to_string(offset) + "-").c_str());
      FileSink sink;
      sink.out = out.get();
      sink.hs = &hs;
      sink.offset = offset;
      curl_easy_setopt(h.curl, CURLOPT_WRITEFUNCTION, on_file_body);
      curl_easy_setopt(h.curl, CURLOPT_WRITEDATA, &sink);
      ProgressState progress{&bar, offset};
      curl_easy_setopt(h.curl, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(h.curl, CURLOPT_XFERINFOFUNCTION, on_progress);
      curl_easy_setopt(h.curl, CURLOPT_XFERINFODATA, &progress);
      char err[CURL_ERROR_SIZE] = {0};
      curl_easy_setopt(h.curl, CURLOPT_ERRORBUFFER, err);
      const CURLcode rc = curl_easy_perform(h.curl);
      const bool flushed = std::fflush(out.get()) == 0;
      out.reset();
      bar.finish();
      long status = 0;
      curl_easy_getinfo(h.curl, CURLINFO_RESPONSE_CODE, &status);
      if (sink.write_failed || !flushed) return io_error(partial.string() + ": write failed (disk full?)");
      if (status == 416 && spec.expected_size >= 0 && offset == spec.expected_size) {
        complete = true;  // the partial file already held everything
      } else if (rc != CURLE_OK && status == 206 && !sink.to_file) {
        last_error = "the server sent a range we did not ask for";
        fs::remove(partial, ec);
        continue;
      } else if (rc != CURLE_OK) {
        last_error = *err ? err : curl_easy_strerror(rc);
        if (status != 0 && !is_retryable(status) && !sink.to_file)
          return http_error("downloading " + spec.label, status, sink.error_body);
        continue;  // cut or failed transfer: the partial file stays, the next try resumes it
      } else if (!sink.to_file) {
        if (status == 206) {
          last_error = "the server sent a range we did not ask for";
          fs::remove(partial, ec);
          continue;
        }
        if (is_retryable(status)) {
          last_error = "the server answered " + std::to_string(status);
          continue;
        }
        if (!sink.decided && (status == 200 || status == 206)) {
          complete = true;  // an empty body
        } else {
          return http_error("downloading " + spec.label, status, sink.error_body);
        }
      } else {
        complete = true;
      }
      if (etag) *etag = hs.etag;
    }
    const int64_t got = static_cast<int64_t>(fs::file_size(partial, ec));
    if (ec) return io_error(partial.string() + ": " + ec.message());
    if (spec.expected_size >= 0 && got != spec.expected_size) {
      last_error = "got " + std::to_string(got) + " of " + std::to_string(spec.expected_size) + " bytes";
      if (got > spec.expected_size) fs::remove(partial, ec);
      continue;
    }
    if (Status st = check_file_oid(partial, spec.oid); !st.is_ok()) {
      fs::remove(partial, ec);  // a wrong file is never resumed from
      return st.with_context("downloading " + spec.label);
    }
    fs::rename(partial, spec.dest, ec);
    if (ec) return io_error(spec.dest.string() + ": " + ec.message());
    return Status::ok();
  }
  return io_error("downloading " + spec.label + " from " + spec.url + " failed after " +
                  std::to_string(spec.max_attempts) + " tries: " + last_error +
                  " (the partial file is kept and resumed next time)");
}

}  // namespace

Status download_file(const DownloadSpec& spec, std::string* etag) {
  init_curl_once();
  std::error_code ec;
  fs::create_directories(spec.dest.parent_path(), ec);
  if (ec) return io_error(spec.dest.parent_path().string() + ": " + ec.message());
  const fs::path partial = spec.dest.string() + ".downloadInProgress";
  // One writer per file: another vlkv on the same cache (a second replica) waits for the first,
  // then finds the file in place. The lock is on the partial file's inode, which the final
  // rename moves to dest, so whoever gets the lock next sees dest and stops.
  const int lock_fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (lock_fd < 0) return io_error(partial.string() + ": cannot open for writing");
  std::unique_ptr<int, void (*)(int*)> lock_guard(new int(lock_fd), [](int* fd) {
    ::close(*fd);
    delete fd;
  });
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    std::fprintf(stderr, "vlkv: %s: another process is downloading it; waiting\n", spec.label.c_str());
    if (flock(lock_fd, LOCK_EX) != 0) return io_error(partial.string() + ": cannot lock");
  }
  if (fs::is_regular_file(spec.dest, ec)) return Status::ok();
  Status st = transfer_with_retries(spec, partial, etag);
  if (!st.is_ok() && fs::file_size(partial, ec) == 0 && !ec) fs::remove(partial, ec);  // nothing to resume
  return st;
}

}  // namespace vlkv::hub
