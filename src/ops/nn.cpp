#include "ops/helpers.h"

namespace ferrite {

void register_nn_ops(OpRegistry& r) {}

}  // namespace ferrite
