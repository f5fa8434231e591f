// A thin C++17 layer over the C API (ferrite.h): RAII handles and exceptions. Everything here is
// inline over the exported C functions, so a C++ program links the same libferrite.so and no C++
// ABI crosses the library boundary. Errors become ferrite::Error (a std::runtime_error that keeps
// the C status code); the threading rules are those of ferrite.h.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ferrite/ferrite.h"

namespace ferrite {

class Error : public std::runtime_error {
 public:
  Error(ferrite_code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ferrite_code code() const { return code_; }

 private:
  ferrite_code code_;
};

// Throws the status as an Error (after releasing it); nothing for NULL (success).
inline void check(ferrite_status* s) {
  if (!s) return;
  ferrite_code code = ferrite_status_code(s);
  std::string message = ferrite_status_message(s);
  ferrite_status_release(s);
  throw Error(code, message);
}

namespace detail {
template <class T, void (*Release)(T*)>
struct Deleter {
  void operator()(T* p) const { Release(p); }
};
template <class T, void (*Release)(T*)>
using Handle = std::unique_ptr<T, Deleter<T, Release>>;
}  // namespace detail

struct DeviceInfo {
  std::string name;
  bool usable = false;
  std::string detail;  // description, or why it is not usable
};

// The registered devices and the default choice.
class Env {
 public:
  Env() {
    ferrite_env* e = nullptr;
    check(ferrite_env_create(&e));
    h_.reset(e);
  }
  std::vector<DeviceInfo> devices() const {
    size_t n = 0;
    check(ferrite_env_device_count(h_.get(), &n));
    std::vector<DeviceInfo> out;
    for (size_t i = 0; i < n; ++i) {
      const char *name = nullptr, *detail = nullptr;
      int usable = 0;
      check(ferrite_env_device(h_.get(), i, &name, &usable, &detail));
      out.push_back({name, usable != 0, detail});
    }
    return out;
  }
  std::string default_device() const {
    const char* name = nullptr;
    check(ferrite_env_default_device(h_.get(), &name, nullptr));
    return name;
  }

 private:
  detail::Handle<ferrite_env, ferrite_env_release> h_;
};

// Session options as a value type; applied when a Session is created.
struct SessionOptions {
  std::string device;     // empty: the best usable device
  std::string precision;  // empty: f32
  int threads = 0;
  int max_concurrency = 0;
  std::string cache_dir;
  bool autotune = false;
  bool set_passes = false;  // passes below replace the device's default
  std::string passes;       // comma-separated; "" = none
};

struct Dim {
  int64_t size = -1;   // -1: not fixed
  std::string symbol;  // for a dim that is not fixed ("batch", "?")
};

struct IoInfo {
  std::string name;
  ferrite_dtype dtype = FERRITE_DTYPE_UNDEFINED;
  int rank = -1;
  std::vector<Dim> dims;
};

// A tensor: ferrite's (an output, a loaded file) or over the caller's memory.
class Value {
 public:
  Value() = default;
  explicit Value(ferrite_value* v) : h_(v) {}
  // Over the caller's host memory (kept alive by the caller while the Value is used).
  template <class T>
  static Value borrow(ferrite_dtype dtype, const std::vector<int64_t>& dims, T* data,
                      size_t count) {
    ferrite_value* v = nullptr;
    check(ferrite_value_create(dtype, dims.data(), dims.size(), data, count * sizeof(T),
                               FERRITE_MEMORY_HOST, &v));
    return Value(v);
  }
  static Value load_pb(const std::string& path) {
    ferrite_value* v = nullptr;
    check(ferrite_value_load_pb(path.c_str(), &v, nullptr));
    return Value(v);
  }
  ferrite_dtype dtype() const {
    ferrite_dtype d = FERRITE_DTYPE_UNDEFINED;
    check(ferrite_value_info(h_.get(), &d, nullptr, nullptr, nullptr));
    return d;
  }
  std::vector<int64_t> dims() const {
    size_t rank = 0;
    const int64_t* dims = nullptr;
    check(ferrite_value_info(h_.get(), nullptr, &rank, &dims, nullptr));
    return std::vector<int64_t>(dims, dims + rank);
  }
  template <class T>
  T* data() {
    void* p = nullptr;
    check(ferrite_value_data(h_.get(), &p, nullptr));
    return static_cast<T*>(p);
  }
  size_t bytes() const {
    size_t n = 0;
    check(ferrite_value_data(h_.get(), nullptr, &n));
    return n;
  }
  const ferrite_value* get() const { return h_.get(); }
  ferrite_value* get() { return h_.get(); }
  explicit operator bool() const { return h_ != nullptr; }

 private:
  detail::Handle<ferrite_value, ferrite_value_release> h_;
};

class Session {
 public:
  explicit Session(const std::string& model_path, const SessionOptions& o = {}) {
    auto opts = make_options(o);
    ferrite_session* s = nullptr;
    check(ferrite_session_create(model_path.c_str(), opts.get(), &s));
    h_.reset(s);
  }
  Session(const void* data, size_t size, const SessionOptions& o = {}) {
    auto opts = make_options(o);
    ferrite_session* s = nullptr;
    check(ferrite_session_create_from_memory(data, size, opts.get(), &s));
    h_.reset(s);
  }

  std::string device() const {
    const char* name = nullptr;
    check(ferrite_session_device(h_.get(), &name, nullptr));
    return name;
  }
  std::vector<IoInfo> inputs() const { return io(true); }
  std::vector<IoInfo> outputs() const { return io(false); }

  // Runs with ferrite-allocated outputs; `names` empty: inputs by position. Thread-safe.
  std::vector<Value> run(const std::vector<std::string>& names, const std::vector<Value>& inputs,
                         ferrite_run_stats* stats = nullptr) {
    std::vector<const char*> n;
    for (const auto& s : names) n.push_back(s.c_str());
    std::vector<const ferrite_value*> in;
    for (const auto& v : inputs) in.push_back(v.get());
    size_t count = 0;
    check(ferrite_session_output_count(h_.get(), &count));
    std::vector<ferrite_value*> out(count, nullptr);
    check(ferrite_session_run(h_.get(), names.empty() ? nullptr : n.data(), in.data(), in.size(),
                              out.data(), out.size(), nullptr, stats));
    std::vector<Value> result;
    for (ferrite_value* v : out) result.emplace_back(v);
    return result;
  }

  ferrite_session* get() { return h_.get(); }

 private:
  static detail::Handle<ferrite_session_options, ferrite_session_options_release> make_options(
      const SessionOptions& o) {
    ferrite_session_options* p = nullptr;
    check(ferrite_session_options_create(&p));
    detail::Handle<ferrite_session_options, ferrite_session_options_release> h(p);
    check(ferrite_session_options_set_device(p, o.device.c_str()));
    if (!o.precision.empty()) check(ferrite_session_options_set_precision(p, o.precision.c_str()));
    check(ferrite_session_options_set_threads(p, o.threads));
    check(ferrite_session_options_set_max_concurrency(p, o.max_concurrency));
    if (!o.cache_dir.empty()) check(ferrite_session_options_set_cache_dir(p, o.cache_dir.c_str()));
    check(ferrite_session_options_set_autotune(p, o.autotune ? 1 : 0));
    if (o.set_passes) check(ferrite_session_options_set_passes(p, o.passes.c_str()));
    return h;
  }

  std::vector<IoInfo> io(bool input) const {
    size_t n = 0;
    check(input ? ferrite_session_input_count(h_.get(), &n)
                : ferrite_session_output_count(h_.get(), &n));
    std::vector<IoInfo> out;
    for (size_t i = 0; i < n; ++i) {
      IoInfo info;
      const char* name = nullptr;
      check(input ? ferrite_session_input_info(h_.get(), i, &name, &info.dtype, &info.rank)
                  : ferrite_session_output_info(h_.get(), i, &name, &info.dtype, &info.rank));
      info.name = name;
      for (int d = 0; d < info.rank; ++d) {
        Dim dim;
        const char* sym = nullptr;
        check(input ? ferrite_session_input_dim(h_.get(), i, d, &dim.size, &sym)
                    : ferrite_session_output_dim(h_.get(), i, d, &dim.size, &sym));
        if (sym) dim.symbol = sym;
        info.dims.push_back(dim);
      }
      out.push_back(std::move(info));
    }
    return out;
  }

  detail::Handle<ferrite_session, ferrite_session_release> h_;
};

}  // namespace ferrite
