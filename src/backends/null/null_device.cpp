// The `null` device: the skeleton a vendor copies to start a new device.
//
// It has every member of the backend contract (backend_api/backend.h) in place and answers
// "unimplemented" from each, as an `unsupported` status naming the member: it compiles,
// registers, shows in `ferrite devices`, and `ferrite cts --device null` reports every case as
// unsupported. Bring-up replaces the members one at a time, in the order of
// docs/adding-a-device.md: properties, runtime, compiler + dialect, heuristics, then prepare().
#include "backend_api/backend.h"
#include "runtime/device.h"

namespace ferrite {

namespace {

Status unimplemented(const char* member) {
  return unsupported("null device: ", member, " is not implemented (skeleton device)");
}

DeviceProperties null_properties() {
  DeviceProperties p;
  p.name = "null";
  p.kind = "accelerator";
  p.model = "null device (skeleton)";
  p.arch = "none";
  p.dtypes = {DType::kF32};
  return p;
}

// Required: memory and ordering. A device calls its driver here.
class NullRuntime : public DeviceRuntime {
 public:
  Expected<void*> allocate(size_t, size_t) override { return unimplemented("runtime.allocate"); }
  void free(void*) override {}
  Status copy_to_device(void*, const void*, size_t) override {
    return unimplemented("runtime.copy_to_device");
  }
  Status copy_to_host(void*, const void*, size_t) override {
    return unimplemented("runtime.copy_to_host");
  }
  Status copy_on_device(void*, const void*, size_t) override {
    return unimplemented("runtime.copy_on_device");
  }
  Status synchronize() override { return unimplemented("runtime.synchronize"); }
};

// Optional: generated source -> loaded module.
class NullCompiler : public KernelCompiler {
 public:
  std::string identity() const override { return "null-compiler 0"; }
  Expected<CompiledModule> compile(const std::string&, const std::string&) override {
    return unimplemented("compiler.compile");
  }
};

// Required with a compiler: lowered kernels -> source.
class NullDialect : public CodegenDialect {
 public:
  std::string name() const override { return "null"; }
  std::string kernel_abi() const override { return "null-v0"; }
  Expected<std::string> generate(const LoweredGraph&, const DeviceProperties&) const override {
    return unimplemented("dialect.generate");
  }
};

class NullDevice : public Device {
 public:
  NullDevice() : parts_(std::make_shared<BackendParts>()) {
    parts_->properties = null_properties();
    parts_->runtime = std::make_unique<NullRuntime>();
    parts_->compiler = std::make_unique<NullCompiler>();
    parts_->dialect = std::make_unique<NullDialect>();
    // heuristics: left out, so finalize() installs DefaultHeuristics.
    Status s = parts_->finalize();
    FERRITE_CHECK(s.is_ok());
  }
  std::string name() const override { return "null"; }
  std::string description() const override {
    return "skeleton device: every member answers 'unimplemented' (template for new devices)";
  }
  DeviceProperties properties() const override { return parts_->properties; }
  Expected<std::unique_ptr<PreparedModel>> prepare(const Graph&, const RunOptions&) override {
    return unimplemented("prepare");
  }

 private:
  std::shared_ptr<BackendParts> parts_;
};

}  // namespace

std::unique_ptr<Device> make_null_device() { return std::make_unique<NullDevice>(); }

}  // namespace ferrite
