#include "ops/helpers.h"

namespace ferrite {

void register_misc_ops(OpRegistry& r) {}

}  // namespace ferrite
