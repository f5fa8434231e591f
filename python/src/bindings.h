// Parts of the ferrite._core module, one function per file that binds them.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/communicator.h"
#include "runtime/device.h"

namespace ferrite {
class Session;
class TensorParallelSession;
}  // namespace ferrite

namespace ferrite::py {

namespace nb = nanobind;

void bind_session(nb::module_& m);
void bind_graph_builder(nb::module_& m);
void bind_communicator(nb::module_& m);

// ferrite._core.Communicator: a communicator of one rank, shared with the sessions that run
// their collectives through it (communicator_bindings.cpp).
struct CommunicatorHandle {
  std::shared_ptr<Communicator> c;
};

// Session options from the Python keywords (ValueError on a bad value).
RunOptions make_options(const std::string& precision, int threads, bool autotune,
                        const std::optional<std::vector<std::string>>& passes,
                        const std::optional<std::string>& dump_dir);

// A Session over a graph built in memory (GraphBuilder) or imported from bytes.
std::unique_ptr<Session> session_from_graph(std::unique_ptr<Graph> g, const std::string& device,
                                            const RunOptions& o);
// One tensor-parallel rank over such a graph, its collectives through `comm`
// (TensorParallelSession::for_rank).
std::unique_ptr<TensorParallelSession> rank_session_from_graph(std::unique_ptr<Graph> g,
                                                               const std::string& device,
                                                               const RunOptions& o,
                                                               const CommunicatorHandle& comm);

}  // namespace ferrite::py
