// The C API's handles (include/ferrite/ferrite.h) and the boundary helpers its functions share:
// statuses built from ferrite::Status, and `guarded`, which turns any C++ exception into a status
// so that none crosses into C.
#pragma once

#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "ferrite/ferrite.h"
#include "ir/tensor.h"
#include "runtime/device.h"
#include "runtime/session.h"
#include "support/status.h"

struct ferrite_status {
  ferrite_code code;
  std::string message;
};

struct ferrite_env {
  struct Device {
    std::string name, detail;
    bool usable = false;
  };
  std::vector<Device> devices;
  std::string default_device, default_why;
};

struct ferrite_session_options {
  ferrite::RunOptions run;
  std::string device;  // empty: the best usable one
  std::string cache_dir;
};

struct ferrite_session {
  // One declared input or output, in the C API's terms (dims -1 with a symbol when not fixed).
  struct Io {
    std::string name;
    ferrite_dtype dtype = FERRITE_DTYPE_UNDEFINED;
    int rank = -1;
    std::vector<int64_t> dims;
    std::vector<std::string> symbols;  // "" for a fixed dim
    ferrite::DType ir_dtype = ferrite::DType::kUndefined;
  };
  std::unique_ptr<ferrite::Session> session;
  std::vector<Io> inputs, outputs;
  std::string device;
};

struct ferrite_value {
  ferrite::Tensor tensor;  // host values (over the caller's memory, or ferrite's)
  ferrite_dtype dtype = FERRITE_DTYPE_UNDEFINED;
  std::vector<int64_t> dims;
  void* data = nullptr;
  size_t bytes = 0;
  ferrite_memory memory = FERRITE_MEMORY_HOST;
  std::string name;  // from a .pb file
};

namespace ferrite::capi {

ferrite_status* make_status(ferrite_code code, std::string message);
// NULL for an ok status; otherwise `code` for a plain error (unsupported maps to its own code).
ferrite_status* from_status(const Status& s, ferrite_code code);

// Runs `f` (returning ferrite_status*) with every exception caught: std::bad_alloc becomes
// FERRITE_OUT_OF_MEMORY, anything else FERRITE_INTERNAL.
template <class F>
ferrite_status* guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return make_status(FERRITE_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return make_status(FERRITE_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return make_status(FERRITE_INTERNAL, "internal error: an unknown exception");
  }
}

std::optional<DType> to_ir_dtype(ferrite_dtype d);
ferrite_dtype to_c_dtype(DType d);

}  // namespace ferrite::capi

#define FERRITE_CAPI_REQUIRE(cond, what)                                            \
  do {                                                                              \
    if (!(cond)) return ferrite::capi::make_status(FERRITE_INVALID_ARGUMENT, what); \
  } while (0)
