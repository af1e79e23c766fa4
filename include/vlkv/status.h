// Status and Result<T>: how every recoverable failure (bad file, bad request,
// out of KV memory) leaves the library. No exception crosses the public API.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace vlkv {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // absurd parameter, bad request
  kInvalidFile,       // malformed or hostile input file
  kUnsupported,       // well-formed, but a type/architecture we do not run
  kNotFound,          // missing file, key or tensor
  kOutOfMemory,       // a memory budget (e.g. --kv-budget) is exhausted
  kIoError,
  kInternal,
  kCancelled,  // stopped on request (Ctrl-C, IngestCheckpointing::stop): no fault of the input
};

// What a failure concerns, for callers that act on it rather than on its message (the CLI
// names the flag whose value was refused). kGeneral: nothing more than its code says.
enum class ErrorKind {
  kGeneral = 0,
  kKvMethod,  // a KV method spec (or a codec it builds) that this model's cache cannot use
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message, ErrorKind kind = ErrorKind::kGeneral)
      : code_(code), kind_(kind), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  ErrorKind kind() const { return kind_; }

  // Prefix context ("loading model.gguf: ") to a failure; ok stays ok, the kind stays.
  Status with_context(const std::string& context) const {
    if (is_ok()) return *this;
    return Status(code_, context + ": " + message_, kind_);
  }
  // The same failure of another kind; ok stays ok.
  Status with_kind(ErrorKind kind) const {
    if (is_ok()) return *this;
    return Status(code_, message_, kind);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  ErrorKind kind_ = ErrorKind::kGeneral;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status invalid_file(std::string m) { return {StatusCode::kInvalidFile, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status out_of_memory(std::string m) { return {StatusCode::kOutOfMemory, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(implicit)
  Result(Status status) : status_(std::move(status)) {}  // NOLINT(implicit)

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return std::move(*value_); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace vlkv

// Early-return helpers for functions returning Status or Result<T>.
#define VLKV_RETURN_IF_ERROR(expr)              \
  do {                                          \
    ::vlkv::Status vlkv_status_ = (expr);       \
    if (!vlkv_status_.is_ok()) return vlkv_status_; \
  } while (0)

#define VLKV_CONCAT_INNER_(a, b) a##b
#define VLKV_CONCAT_(a, b) VLKV_CONCAT_INNER_(a, b)
#define VLKV_ASSIGN_OR_RETURN(lhs, expr)                                   \
  auto VLKV_CONCAT_(vlkv_result_, __LINE__) = (expr);                      \
  if (!VLKV_CONCAT_(vlkv_result_, __LINE__).is_ok())                       \
    return VLKV_CONCAT_(vlkv_result_, __LINE__).status();                  \
  lhs = std::move(VLKV_CONCAT_(vlkv_result_, __LINE__)).value()
