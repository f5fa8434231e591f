#include "ops/op_schema.h"

namespace ferrite {

void OpRegistry::add(OpSchema schema) {
  for (const auto& s : schemas_) {
    bool overlap = s.name == schema.name && s.domain == schema.domain &&
                   s.since_version <= schema.last_version && schema.since_version <= s.last_version;
    FERRITE_CHECK(!overlap);  // two registrations of one op for the same opset
  }
  FERRITE_CHECK(schema.kernel && schema.infer);
  schemas_.push_back(std::move(schema));
}

const OpSchema* OpRegistry::find(const std::string& domain, const std::string& op,
                                 int opset) const {
  for (const auto& s : schemas_)
    if (s.name == op && s.domain == domain && s.since_version <= opset && opset <= s.last_version)
      return &s;
  return nullptr;
}

bool OpRegistry::knows(const std::string& domain, const std::string& op) const {
  for (const auto& s : schemas_)
    if (s.name == op && s.domain == domain) return true;
  return false;
}

const OpRegistry& OpRegistry::global() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_elementwise_ops(r);
    register_activation_ops(r);
    register_math_ops(r);
    register_conv_ops(r);
    register_pool_ops(r);
    register_normalization_ops(r);
    register_reduction_ops(r);
    register_shape_ops(r);
    register_indexing_ops(r);
    register_misc_ops(r);
    register_fused_ops(r);
    register_collective_ops(r);
    register_control_flow_ops(r);
    register_sequence_ops(r);
    return r;
  }();
  return registry;
}

}  // namespace ferrite
