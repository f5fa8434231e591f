// Counters of the cpu library kernels, for tests and diagnostics.
#pragma once

#include <cstdint>

namespace ferrite {

// How many times a library kernel that accepted a node handed it to the reference kernel at run
// time (a shape or attribute combination it does not cover, or an error case).
int64_t cpu_library_fallbacks();

}  // namespace ferrite
