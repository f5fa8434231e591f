// The `reference` device: interprets the graph node by node with the op table's reference
// kernels. It is the oracle every other device is tested against, so it favours obviously
// correct code over speed; shapes are resolved at run time, so it handles any dynamic shape.
#include <memory>
#include <unordered_map>

#include "execute/step_recorder.h"
#include "ops/context.h"
#include "ops/op_schema.h"
#include "runtime/device.h"

namespace ferrite {

namespace {

class ReferenceModel : public PreparedModel {
 public:
  ReferenceModel(const Graph& g, const RunOptions& opts) : graph_(g) {
    // `--trace`: one event per node (execute/step_recorder.h).
    if (opts.trace) trace_ = std::make_unique<StepRecorder>(host_, "reference", false, opts.trace);
    auto slot = [&](const Value* v) {
      if (v && !slots_.count(v)) slots_.emplace(v, static_cast<int>(slots_.size()));
    };
    for (const Value* v : g.inputs()) slot(v);
    for (const Value* v : g.initializers()) slot(v);
    for (const auto& n : g.nodes()) {
      for (const Value* v : n->inputs) slot(v);
      for (const Value* v : n->outputs) slot(v);
    }
    for (const Value* v : g.outputs()) slot(v);
    // Last node index that reads each slot, so intermediates are freed early.
    last_use_.assign(slots_.size(), -1);
    for (size_t i = 0; i < g.nodes().size(); ++i)
      for (const Value* v : g.nodes()[i]->inputs)
        if (v) last_use_[slots_.at(v)] = static_cast<int>(i);
    for (const Value* v : g.outputs()) last_use_[slots_.at(v)] = INT32_MAX;
  }

  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) override {
    std::vector<Tensor> values(slots_.size());
    for (size_t i = 0; i < graph_.inputs().size(); ++i)
      values[slots_.at(graph_.inputs()[i])] = inputs[i];
    for (const Value* v : graph_.initializers()) values[slots_.at(v)] = *v->constant;
    const auto& nodes = graph_.nodes();
    if (trace_) trace_->begin_run(nodes.size());
    for (size_t ni = 0; ni < nodes.size(); ++ni) {
      const Node& node = *nodes[ni];
      if (trace_) trace_->start(ni);
      std::vector<const Tensor*> ins;
      for (const Value* v : node.inputs) {
        if (!v) {
          ins.push_back(nullptr);
          continue;
        }
        const Tensor& t = values[slots_.at(v)];
        FERRITE_CHECK(t.defined());
        ins.push_back(&t);
      }
      std::vector<Tensor> outs(node.outputs.size());
      KernelContext ctx(node, std::move(ins), outs);
      FERRITE_RETURN_IF_ERROR(node.schema->kernel(ctx));
      if (trace_) {
        std::vector<std::string> names{node.name};
        trace_->stop(ni, node.name.empty() ? node.op_type : node.name, node.op_type, &names);
      }
      for (size_t k = 0; k < node.outputs.size(); ++k) {
        const Value* v = node.outputs[k];
        if (!v) continue;
        if (!outs[k].defined()) return err(node.describe(), ": kernel did not produce output ", k);
        FERRITE_RETURN_IF_ERROR(check_inferred(node, *v, outs[k]));
        values[slots_.at(v)] = std::move(outs[k]);
      }
      for (const Value* v : node.inputs)
        if (v && last_use_[slots_.at(v)] == static_cast<int>(ni)) values[slots_.at(v)] = Tensor();
    }
    if (trace_) trace_->end_run();
    std::vector<Tensor> result;
    for (const Value* v : graph_.outputs()) result.push_back(values[slots_.at(v)]);
    return result;
  }

 private:
  // The kernel's result must agree with what inference promised; a disagreement is a bug in
  // ferrite (or an input the model cannot take), reported rather than propagated.
  static Status check_inferred(const Node& node, const Value& v, const Tensor& t) {
    if (t.dtype() != v.type.dtype)
      return err(node.describe(), ": output '", v.name, "' has dtype ", dtype_name(t.dtype()),
                 " but inference said ", dtype_name(v.type.dtype));
    const Shape& s = v.type.shape;
    if (!s.rank_known()) return Status::ok();
    if (s.rank() != t.rank())
      return err(node.describe(), ": output '", v.name, "' has shape ", dims_to_string(t.dims()),
                 " but inference said ", s.to_string());
    for (size_t d = 0; d < s.rank(); ++d) {
      auto sv = s[d].value();
      if (sv && *sv != t.dim(d))
        return err(node.describe(), ": output '", v.name, "' has shape ", dims_to_string(t.dims()),
                   " but inference said ", s.to_string());
    }
    return Status::ok();
  }

  const Graph& graph_;
  std::unordered_map<const Value*, int> slots_;
  std::vector<int> last_use_;
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
    p.dtypes = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8, DType::kI16,
                DType::kI32, DType::kI64, DType::kU8, DType::kU16, DType::kU32, DType::kU64,
                DType::kBool};
    return p;
  }
  std::string description() const override {
    return "op-table reference kernels, interpreted on the host (the correctness oracle)";
  }
  // bf16 / fp16 graphs run through the op table's Half / BFloat16 kernels (float compute).
  Status check_precision(Precision p) const override {
    if (p == Precision::kTF32)
      return unsupported("device 'reference' does not run precision tf32 (a GPU tensor-core GEMM "
                         "mode); use f32, bf16 or fp16");
    return Status::ok();
  }
  Expected<std::unique_ptr<PreparedModel>> prepare(const Graph& graph,
                                                   const RunOptions& opts) override {
    return std::unique_ptr<PreparedModel>(new ReferenceModel(graph, opts));
  }
};

}  // namespace

std::unique_ptr<Device> make_reference_device() { return std::make_unique<ReferenceDevice>(); }

}  // namespace ferrite
