// Horizontal fusion: pointwise kernels over the same iteration space that read a common buffer
// and do not depend on each other become one kernel with several outputs, so the shared input
// is read once and one launch replaces several. A later kernel moves up to the earlier one, which
// is legal when every buffer it reads is already written there; it then writes its output
// earlier, which lengthens that buffer's life by the steps in between (the planner accounts
// for it). Each merge is logged with FERRITE_LOG=fusion and scored by the bytes it saves.
//
// Opt-in per device (LoweringOptions::horizontal_fusion): the dialect must store
// Kernel::extra_outputs.
#pragma once

#include "lower/lowering.h"

namespace ferrite {

// Merges in place; returns the number of kernels merged away.
int fuse_horizontal(LoweredGraph& lg, size_t max_exprs);

}  // namespace ferrite
