// External tensor data (ONNX "location/offset/length" entries), confined to the model directory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
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

// The range's bytes in a read-only-by-contract, copy-on-write mapping of its file, or null where
// a copy is the better choice (a range smaller than kMinMappedBytes, an offset not aligned to
// kMappedAlignment, or mmap refusing). Every range of one file shares one mapping, released with
// its last tensor. Mapping is what lets a model larger than the host's memory load at all, and a
// tensor-parallel rank touch only the pages of its own shard: nothing is read until used.
inline constexpr int64_t kMinMappedBytes = 1 << 20;
inline constexpr int64_t kMappedAlignment = 64;
std::shared_ptr<uint8_t[]> map_external_data(const ExternalDataRange& range);

}  // namespace ferrite
