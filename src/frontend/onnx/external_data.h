// External tensor data (ONNX "location/offset/length" entries), confined to the model directory.
#pragma once

#include <filesystem>
#include <string>

#include "support/status.h"

namespace onnx {
class TensorProto;
}

namespace ferrite {

// Where a tensor's external bytes live, once validated.
struct ExternalDataRange {
  std::filesystem::path file;  // canonical, inside the model directory
  std::string location;        // as written in the model, for messages
  int64_t offset = 0;
  int64_t length = 0;
};

// Validates `proto`'s external data entry: refuses absolute paths, ".." components, paths that
// resolve (through symlinks) outside `model_dir`, missing or non-regular files, a length other
// than `expected_bytes` and ranges outside the file. `what` names the tensor in messages.
// Nothing is read or allocated, so a lying model costs nothing before the check.
Expected<ExternalDataRange> locate_external_data(const onnx::TensorProto& proto,
                                                 const std::string& what,
                                                 const std::filesystem::path& model_dir,
                                                 int64_t expected_bytes);

// Reads the range into `dst` (range.length bytes).
Status read_external_data(const ExternalDataRange& range, const std::string& what, void* dst);

}  // namespace ferrite
