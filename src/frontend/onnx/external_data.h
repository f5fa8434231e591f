// External tensor data (ONNX "location/offset/length" entries), confined to the model directory.
#pragma once

#include <filesystem>
#include <string>

#include "support/status.h"

namespace onnx {
class TensorProto;
}

namespace ferrite {

// Reads exactly `expected_bytes` for `proto` from its external file; `what` names the tensor in
// messages. Refuses absolute paths,
// ".." components, paths that resolve (through symlinks) outside `model_dir`, missing files and
// offset/length ranges outside the file.
Expected<std::string> read_external_data(const onnx::TensorProto& proto, const std::string& what,
                                         const std::filesystem::path& model_dir,
                                         int64_t expected_bytes);

}  // namespace ferrite
