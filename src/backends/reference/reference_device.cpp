// The `reference` device: interprets the graph node by node with the op table's reference
// kernels. It is the oracle every other device is tested against, so it favours obviously
// correct code over speed; shapes are resolved at run time, so it handles any dynamic shape.
#include <memory>

#include "execute/step_recorder.h"
#include "ops/interpreter.h"
#include "ops/op_schema.h"
#include "runtime/device.h"

namespace ferrite {

namespace {

class ReferenceModel : public PreparedModel {
 public:
  ReferenceModel(const Graph& g, const RunOptions& opts) : graph_(g), interpreter_(g) {
    // `--trace`: one event per node (execute/step_recorder.h).
    if (opts.trace) trace_ = std::make_unique<StepRecorder>(host_, "reference", false, opts.trace);
  }

  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) override {
    if (!trace_) return interpreter_.run(inputs);
    GraphInterpreter::Hooks hooks;
    hooks.before = [&](size_t ni) { trace_->start(ni); };
    hooks.after = [&](size_t ni, const Node& node) {
      std::vector<std::string> names{node.name};
      trace_->stop(ni, node.name.empty() ? node.op_type : node.name, node.op_type, &names);
    };
    trace_->begin_run(graph_.nodes().size());
    auto result = interpreter_.run(inputs, &hooks);
    if (result) trace_->end_run();
    return result;
  }

 private:
  const Graph& graph_;
  GraphInterpreter interpreter_;
  HostRuntime host_;
  std::unique_ptr<StepRecorder> trace_;
};

class ReferenceDevice : public Device {
 public:
  std::string name() const override { return "reference"; }
  DeviceProperties properties() const override {
    DeviceProperties p;
    p.name = "reference";
    p.kind = "host";
    p.arch = "interpreter (op-table reference kernels)";
    p.host_addressable = true;
    p.dtypes = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8,
                DType::kI16, DType::kI32, DType::kI64, DType::kU8,   DType::kU16,
                DType::kU32, DType::kU64, DType::kBool};
    return p;
  }
  std::string description() const override {
    return "op-table reference kernels, interpreted on the host (the correctness oracle)";
  }
  // bf16 / fp16 graphs run through the op table's Half / BFloat16 kernels (float compute).
  Status check_precision(Precision p) const override { return check_storage_precision(*this, p); }
  Expected<std::unique_ptr<PreparedModel>> prepare(const Graph& graph,
                                                   const RunOptions& opts) override {
    return std::unique_ptr<PreparedModel>(new ReferenceModel(graph, opts));
  }
};

}  // namespace

std::unique_ptr<Device> make_reference_device() {
  return std::make_unique<ReferenceDevice>();
}

}  // namespace ferrite
