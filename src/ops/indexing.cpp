#include "ops/helpers.h"

namespace ferrite {

void register_indexing_ops(OpRegistry& r) {}

}  // namespace ferrite
