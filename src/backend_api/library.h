// Library ops: a device's own implementations of ops the lowering does not turn into generated
// kernels (GEMM, convolution, pooling, attention, ...). Optional member of the backend contract
// (BackendParts::library). The table is keyed by OpId, an interned (domain, op type) id, so that
// the executor resolves each step's op once when it plans the steps, never by string at run time.
//
// Host-memory devices (DeviceRuntime::host_memory) implement `run_host` over tensors; devices with
// memory of their own implement `run_device` over device views. An op declines a node it does not
// handle (`accepts`, or `run_device` answering false before it wrote anything); the step then runs
// the op table's reference kernel on the host (a "host fallback" on devices with their own memory).
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "support/status.h"

namespace ferrite {

class KernelContext;

// An interned (domain, op type) pair; "" and "ai.onnx" are the same domain. 0 is "no op".
class OpId {
 public:
  OpId() = default;
  static OpId of(std::string_view domain, std::string_view op_type);
  static OpId of(const Node& n) { return of(n.domain, n.op_type); }
  int value() const { return id_; }
  bool valid() const { return id_ != 0; }
  bool operator==(const OpId& o) const { return id_ == o.id_; }
  bool operator!=(const OpId& o) const { return id_ != o.id_; }

 private:
  explicit OpId(int id) : id_(id) {}
  int id_ = 0;
};

// A step input in device memory.
struct DeviceView {
  const void* ptr = nullptr;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  const Tensor* host = nullptr;  // the value on the host too, when it is there (small constants)
  const float* f32() const { return static_cast<const float*>(ptr); }
};

// What a device library op gets from the executor.
struct DeviceCall {
  std::vector<std::optional<DeviceView>> in;  // nullopt: input absent
  // Device memory for output i of (dtype, dims).
  std::function<Expected<void*>(size_t, DType, const std::vector<int64_t>&)> output;
  // The dims the graph infers for output i at this run's shape symbols (ops that do not compute
  // their output shape themselves: a plugin's library ops).
  std::function<Expected<std::vector<int64_t>>(size_t)> output_dims;
  // Device scratch valid for the rest of the step.
  std::function<Expected<void*>(size_t)> scratch;
  // Device word an op sets to `error_tag` on invalid data (Gather's indices); the executor
  // checks it after the run (ops with LibraryOp::sets_error_flag) and reports the step.
  int* error_flag = nullptr;
  int error_tag = 0;
  bool tf32 = false;  // f32 GEMMs on TF32 tensor cores (--precision tf32)
};

struct LibraryOp {
  // Whether the op runs `node` (dtype, attributes); null: every node of the op. Asked once per
  // step when the steps are planned. `state` is the device's (ExecutorConfig::library_state).
  bool (*accepts)(const Node& node, void* state) = nullptr;
  Status (*run_host)(KernelContext& ctx, void* state) = nullptr;
  Expected<bool> (*run_device)(const Node& node, DeviceCall& call, void* state) = nullptr;
  // Devices with their own memory: whether to run on the device although every input is already
  // on the host. `constant_bytes[i]`: size of input i when it is a constant, else -1. Null: no.
  bool (*prefer_device)(const Node& node, const std::vector<int64_t>& constant_bytes) = nullptr;
  bool sets_error_flag = false;
  // What a set error flag means, after the node's description.
  const char* flag_error = "an index is out of range";
};

class LibraryOps {
 public:
  void add(OpId op, LibraryOp impl) { ops_[op.value()].push_back(impl); }
  void add(std::string_view domain, std::string_view op_type, LibraryOp impl) {
    add(OpId::of(domain, op_type), impl);
  }
  // The first implementation of `node`'s op that accepts it, or null.
  const LibraryOp* find(const Node& node, void* state) const;
  bool empty() const { return ops_.empty(); }

 private:
  std::unordered_map<int, std::vector<LibraryOp>> ops_;
};

}  // namespace ferrite
