#include "frontend/onnx/external_data.h"

#include <onnx/onnx_pb.h>

#include <fstream>

#include "frontend/onnx/tensor_proto.h"
#include "support/checked_math.h"

namespace ferrite {

namespace fs = std::filesystem;

namespace {
Expected<int64_t> parse_non_negative(const std::string& what, const std::string& key,
                                     const std::string& text) {
  auto bad = [&] {
    return err(what, ": bad external ", key, " '", printable_name(text), "'");
  };
  if (text.empty()) return bad();
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return bad();
    auto r = checked_mul(v, 10);
    if (r) r = checked_add(*r, c - '0');
    if (!r) return bad();
    v = *r;
  }
  return v;
}

bool is_within(const fs::path& child, const fs::path& parent) {
  auto c = child.begin();
  for (auto p = parent.begin(); p != parent.end(); ++p, ++c) {
    if (p->empty()) continue;
    if (c == child.end() || *c != *p) return false;
  }
  return true;
}
}  // namespace

Expected<ExternalDataRange> locate_external_data(const onnx::TensorProto& proto,
                                                 const std::string& what,
                                                 const fs::path& model_dir,
                                                 int64_t expected_bytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : proto.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      FERRITE_ASSIGN_OR_RETURN(offset, parse_non_negative(what, "offset", kv.value()));
    } else if (kv.key() == "length") {
      FERRITE_ASSIGN_OR_RETURN(length, parse_non_negative(what, "length", kv.value()));
    }
  }
  if (location.empty()) return err(what, ": external data has no location");
  for (unsigned char c : location)
    if (c < 0x20 || c == 0x7f)
      return err(what, ": external data location '", printable_name(location),
                 "' contains a control character");
  fs::path rel(location);
  if (rel.is_absolute() || (!location.empty() && (location[0] == '/' || location[0] == '\\')))
    return err(what, ": external data path '", location, "' is absolute");
  for (const auto& part : rel)
    if (part == "..")
      return err(what, ": external data path '", location, "' contains '..'");

  std::error_code ec;
  fs::path dir = fs::canonical(model_dir, ec);
  if (ec) return err("cannot resolve model directory '", model_dir.string(), "'");
  fs::path full = dir / rel;
  if (!fs::exists(full, ec))
    return err(what, ": external data file '", location, "' does not exist");
  fs::path resolved = fs::canonical(full, ec);
  if (ec) return err(what, ": cannot resolve external data file '", location, "'");
  if (!is_within(resolved, dir))
    return err(what, ": external data file '", location,
               "' resolves outside the model directory");
  if (!fs::is_regular_file(resolved, ec))
    return err(what, ": external data '", location, "' is not a regular file");
  auto fsize = static_cast<int64_t>(fs::file_size(resolved, ec));
  if (ec) return err(what, ": cannot stat '", location, "'");
  if (length < 0) length = expected_bytes;
  if (length != expected_bytes)
    return err(what, ": external data length ", length, " does not match the ",
               expected_bytes, " bytes its dims need");
  auto end = checked_add(offset, length);
  if (!end || *end > fsize)
    return err(what, ": external data range [", offset, ", +", length,
               ") lies outside '", location, "' (", fsize, " bytes)");
  return ExternalDataRange{resolved, location, offset, length};
}

Status read_external_data(const ExternalDataRange& range, const std::string& what, void* dst) {
  if (range.length == 0) return Status::ok();
  std::ifstream in(range.file, std::ios::binary);
  if (!in) return err(what, ": cannot open '", range.location, "'");
  in.seekg(range.offset);
  in.read(static_cast<char*>(dst), range.length);
  if (!in || in.gcount() != range.length)
    return err(what, ": short read from '", range.location, "'");
  return Status::ok();
}

}  // namespace ferrite
