// The loopback communicator group: N ranks that are threads of one process, exchanging host
// memory. It runs tensor-parallel graphs on any device without a network or a GPU library
// (`ferrite run --tensor-parallel N --device cpu`), which is how CI checks that a sharded graph
// computes what the whole one does.
#pragma once

#include <memory>
#include <vector>

#include "ops/communicator.h"

namespace ferrite {

// One communicator per rank, all of one group. Sums are taken in rank order on every rank, so
// every rank gets bit-identical results.
std::vector<std::unique_ptr<Communicator>> make_loopback_group(int size);

}  // namespace ferrite
