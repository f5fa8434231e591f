#include "ops/helpers.h"

namespace ferrite {

void register_pool_ops(OpRegistry& r) {}

}  // namespace ferrite
