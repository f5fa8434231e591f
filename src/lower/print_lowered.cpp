// print_lowered (lowering.h): the lowered graph as text, for dumps and golden tests.
#include <sstream>

#include "lower/lowering.h"

namespace ferrite {

std::string print_lowered(const LoweredGraph& lg) {
  std::ostringstream os;
  os << "lowered: " << lg.steps.size() << " steps (" << lg.kernels << " generated kernels, "
     << lg.library_steps << " library calls), " << lg.buffers.size() << " buffers\n";
  for (const Step& s : lg.steps) {
    if (s.kind == Step::Kind::kKernel) {
      os << print_kernel(s.kernel);
    } else {
      os << "library " << s.node->op_type << " (" << s.node->name << ") in:";
      for (int b : s.inputs) os << " buf" << b;
      os << " out:";
      for (int b : s.outputs) os << " buf" << b;
      os << "\n";
    }
  }
  return os.str();
}

}  // namespace ferrite
