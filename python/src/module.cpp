// ferrite._core: the C++ runtime seen from Python. The public API is the `ferrite` package
// (python/ferrite), which wraps these classes; this module stays small and typed.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>

#include "bindings.h"
#include "tensor_interop.h"

namespace ferrite::py {

namespace {

struct FerriteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct UnsupportedError : FerriteError {
  using FerriteError::FerriteError;
};

}  // namespace

void raise_status(const Status& s) {
  if (s.is_unsupported()) throw UnsupportedError(s.message());
  throw FerriteError(s.message());
}

}  // namespace ferrite::py

NB_MODULE(_core, m) {
  namespace nb = nanobind;
  using namespace ferrite;
  using namespace ferrite::py;
  m.doc() = "ferrite's C++ runtime (use the `ferrite` package, not this module)";
  // Sessions may live in torch.compile's caches until the interpreter exits; that is not a leak.
  nb::set_leak_warnings(false);
  auto base = nb::exception<FerriteError>(m, "FerriteError", PyExc_RuntimeError);
  nb::exception<UnsupportedError>(m, "UnsupportedError", base.ptr());
  m.def(
      "devices",
      [] {
        std::vector<std::string> names = DeviceRegistry::global().names();
        return names;
      },
      "Names of the devices this build can run on (built in and plugins found).");
  m.def(
      "default_device",
      [] {
        std::string why;
        std::string name = default_device(&why);
        return std::make_pair(name, why);
      },
      "The device a Session without one runs on (cuda where a GPU answers, else cpu), and why.");
  m.def(
      "device_origin",
      [](const std::string& name) { return DeviceRegistry::global().origin(name); },
      nb::arg("name"));
  bind_communicator(m);
  bind_session(m);
  bind_graph_builder(m);
}
