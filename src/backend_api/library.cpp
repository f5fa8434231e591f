#include "backend_api/library.h"

#include <map>
#include <mutex>
#include <string>

namespace ferrite {

OpId OpId::of(std::string_view domain, std::string_view op_type) {
  static std::mutex mu;
  static std::map<std::pair<std::string, std::string>, int, std::less<>> ids;
  if (domain == "ai.onnx") domain = "";
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(std::string(domain), std::string(op_type));
  auto it = ids.find(key);
  if (it != ids.end()) return OpId(it->second);
  const int id = static_cast<int>(ids.size()) + 1;
  ids.emplace(std::move(key), id);
  return OpId(id);
}

const LibraryOp* LibraryOps::find(const Node& node, void* state) const {
  auto it = ops_.find(OpId::of(node).value());
  if (it == ops_.end()) return nullptr;
  for (const LibraryOp& op : it->second)
    if (!op.accepts || op.accepts(node, state)) return &op;
  return nullptr;
}

}  // namespace ferrite
