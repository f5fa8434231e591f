// Errors as values: every boundary that sees user input (model files, input tensors, options)
// returns Status or Expected<T>; internal invariants use FERRITE_CHECK.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace ferrite {

// kUnsupported marks valid input that ferrite does not handle yet (unknown op, opset, dtype), so
// that conformance runs can tell "unsupported" from "wrong".
enum class StatusCode { kOk, kError, kUnsupported };

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message, StatusCode code = StatusCode::kError) {
    Status s;
    s.message_ = std::move(message);
    s.failed_ = true;
    s.code_ = code;
    return s;
  }
  bool is_ok() const { return !failed_; }
  StatusCode code() const { return failed_ ? code_ : StatusCode::kOk; }
  bool is_unsupported() const { return code() == StatusCode::kUnsupported; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return message_; }
  // Adds context in front of the message ("node 'conv1' (Conv): ...").
  Status with_context(const std::string& context) const {
    if (!failed_) return *this;
    return error(context + ": " + message_, code_);
  }

 private:
  std::string message_;
  bool failed_ = false;
  StatusCode code_ = StatusCode::kError;
};

template <class T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}
  Expected(Status status) : v_(std::move(status)) {}
  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Status& status() const {
    static const Status ok_status;
    return has_value() ? ok_status : std::get<1>(v_);
  }

 private:
  std::variant<T, Status> v_;
};

// Builds messages: err("axis ", axis, " out of range").
template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
template <class... Args>
Status err(const Args&... args) {
  return Status::error(str_cat(args...));
}

template <class... Args>
Status unsupported(const Args&... args) {
  return Status::error(str_cat(args...), StatusCode::kUnsupported);
}

[[noreturn]] inline void check_failed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "ferrite internal error: check '%s' failed at %s:%d\n", cond, file, line);
  std::abort();
}

}  // namespace ferrite

// Internal invariants only; never for conditions that user input can trigger.
#define FERRITE_CHECK(cond) \
  do {                      \
    if (!(cond)) ::ferrite::check_failed(#cond, __FILE__, __LINE__); \
  } while (0)

#define FERRITE_RETURN_IF_ERROR(expr)       \
  do {                                      \
    ::ferrite::Status _st = (expr);         \
    if (!_st.is_ok()) return _st;           \
  } while (0)

#define FERRITE_CONCAT_INNER(a, b) a##b
#define FERRITE_CONCAT(a, b) FERRITE_CONCAT_INNER(a, b)
#define FERRITE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.has_value()) return tmp.status();          \
  lhs = std::move(tmp).value()
#define FERRITE_ASSIGN_OR_RETURN(lhs, expr) \
  FERRITE_ASSIGN_OR_RETURN_IMPL(FERRITE_CONCAT(_exp_, __LINE__), lhs, expr)
