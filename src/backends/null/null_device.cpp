// The `null` device: the smallest complete device, and the template for a new one.
//
// It provides only the required backend parts (backend_api/backend.h): properties and a runtime
// (host memory standing in for device memory). Without a compiler nothing is generated, so
// prepare() runs the graph on the op table's reference kernels, moving every input through the
// runtime's copies as a real device would (host -> device -> host) so that the runtime contract
// is exercised on every run. A new device replaces the runtime with its own, adds a compiler,
// a dialect and heuristics, and moves graph execution onto the device step by step.
#include <cstring>

#include "backend_api/backend.h"
#include "runtime/device.h"

namespace ferrite {

namespace {

DeviceProperties null_properties() {
  DeviceProperties p;
  p.name = "null";
  p.kind = "accelerator";
  p.model = "null device (skeleton)";
  p.arch = "none: runs reference kernels";
  p.dtypes = {DType::kF32};
  p.host_addressable = true;
  return p;
}

// Host memory standing in for device memory; a real device calls its driver here.
class NullRuntime : public HostRuntime {};

class NullModel : public PreparedModel {
 public:
  NullModel(std::unique_ptr<PreparedModel> oracle, std::shared_ptr<BackendParts> parts)
      : oracle_(std::move(oracle)), parts_(std::move(parts)) {}

  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) override {
    DeviceRuntime& rt = *parts_->runtime;
    std::vector<Tensor> staged;
    for (const Tensor& in : inputs) {
      size_t bytes = static_cast<size_t>(in.nbytes());
      FERRITE_ASSIGN_OR_RETURN(void* dev, rt.allocate(bytes, 64));
      Tensor back = Tensor::zeros(in.dtype(), in.dims());
      Status s = rt.copy_to_device(dev, in.raw(), bytes);
      if (s.is_ok()) s = rt.copy_to_host(back.raw(), dev, bytes);
      if (s.is_ok()) s = rt.synchronize();
      rt.free(dev);
      FERRITE_RETURN_IF_ERROR(s);
      staged.push_back(std::move(back));
    }
    return oracle_->run(staged);
  }

 private:
  std::unique_ptr<PreparedModel> oracle_;
  std::shared_ptr<BackendParts> parts_;
};

class NullDevice : public Device {
 public:
  NullDevice() : parts_(std::make_shared<BackendParts>()) {
    parts_->properties = null_properties();
    parts_->runtime = std::make_unique<NullRuntime>();
    Status s = parts_->finalize();
    FERRITE_CHECK(s.is_ok());
  }
  std::string name() const override { return "null"; }
  std::string description() const override {
    return "skeleton device: required parts only, runs reference kernels (template for new "
           "devices)";
  }
  DeviceProperties properties() const override { return parts_->properties; }
  Expected<std::unique_ptr<PreparedModel>> prepare(const Graph& graph,
                                                   const RunOptions& opts) override {
    FERRITE_ASSIGN_OR_RETURN(auto reference, DeviceRegistry::global().create("reference"));
    FERRITE_ASSIGN_OR_RETURN(auto oracle, reference->prepare(graph, opts));
    return std::unique_ptr<PreparedModel>(std::make_unique<NullModel>(std::move(oracle), parts_));
  }

 private:
  std::shared_ptr<BackendParts> parts_;
};

}  // namespace

std::unique_ptr<Device> make_null_device() { return std::make_unique<NullDevice>(); }

}  // namespace ferrite
