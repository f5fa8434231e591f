#include "ops/helpers.h"

namespace ferrite {

void register_normalization_ops(OpRegistry& r) {}

}  // namespace ferrite
