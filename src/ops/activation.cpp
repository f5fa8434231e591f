#include "ops/helpers.h"

namespace ferrite {

void register_activation_ops(OpRegistry& r) {}

}  // namespace ferrite
