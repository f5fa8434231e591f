// Communicators: what the collective ops (ops/collective.cpp: com.microsoft AllReduce, AllGather,
// ReduceScatter) exchange data through, one rank of a group each. A tensor-parallel run
// (distributed/tensor_parallel.h) binds a rank's communicator to the thread that runs that
// rank's model; the collective kernels find it there. A binding rather than an argument because
// the kernels are the op table's reference kernels, which every device runs the same way, and a
// rank's whole run happens on the thread that called run().
//
// Implementations: the loopback group (distributed/loopback.cpp: ranks are threads of one
// process, host memory) and NCCL on the cuda device.
#pragma once

#include <cstdint>
#include <string>

#include "ir/dtype.h"
#include "support/status.h"

namespace ferrite {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "loopback rank 1 of 2", for messages.
  virtual std::string describe() const = 0;

  // Collectives over host memory. Every rank of the group calls the same collectives in the same
  // order with the same count and dtype; each call returns when this rank's result is complete.
  // `out` may equal `in` for all_reduce_sum.
  //   all_reduce_sum:     out[i] = sum over ranks of in[i], i < count
  //   all_gather:         out[r*count + i] = in[i] of rank r
  //   reduce_scatter_sum: out[i] = sum over ranks of in[rank()*count + i], i < count
  virtual Status all_reduce_sum(const void* in, void* out, int64_t count, DType dtype) = 0;
  virtual Status all_gather(const void* in, void* out, int64_t count, DType dtype) = 0;
  virtual Status reduce_scatter_sum(const void* in, void* out, int64_t count, DType dtype) = 0;

  // Fails every collective in flight or to come on every rank with `reason` (a rank that failed
  // must not leave the others waiting for it forever).
  virtual void abort(const std::string& reason) = 0;

  // The collectives library's own handle for a device's library ops (kind "nccl": the
  // ncclComm_t of this rank), or null.
  virtual void* native(const char* kind) const {
    (void)kind;
    return nullptr;
  }
};

// The communicator bound to the calling thread, or null.
Communicator* bound_communicator();

// Binds `c` to the calling thread for the scope's lifetime (restoring the previous binding).
class BindCommunicator {
 public:
  explicit BindCommunicator(Communicator* c);
  ~BindCommunicator();
  BindCommunicator(const BindCommunicator&) = delete;
  BindCommunicator& operator=(const BindCommunicator&) = delete;

 private:
  Communicator* previous_;
};

}  // namespace ferrite
