#include "ops/helpers.h"

namespace ferrite {

void register_conv_ops(OpRegistry& r) {}

}  // namespace ferrite
