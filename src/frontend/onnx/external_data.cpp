#include "frontend/onnx/external_data.h"

#include <fcntl.h>
#include <onnx/onnx_pb.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>

#include "frontend/onnx/tensor_proto.h"
#include "support/checked_math.h"

namespace ferrite {

namespace fs = std::filesystem;

namespace {
Expected<int64_t> parse_non_negative(const std::string& what, const std::string& key,
                                     const std::string& text) {
  auto bad = [&] { return err(what, ": bad external ", key, " '", printable_name(text), "'"); };
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
                                                 const std::string& what, const fs::path& model_dir,
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
    if (part == "..") return err(what, ": external data path '", location, "' contains '..'");

  std::error_code ec;
  fs::path dir = fs::canonical(model_dir, ec);
  if (ec) return err("cannot resolve model directory '", model_dir.string(), "'");
  fs::path full = dir / rel;
  if (!fs::exists(full, ec))
    return err(what, ": external data file '", location, "' does not exist");
  fs::path resolved = fs::canonical(full, ec);
  if (ec) return err(what, ": cannot resolve external data file '", location, "'");
  if (!is_within(resolved, dir))
    return err(what, ": external data file '", location, "' resolves outside the model directory");
  if (!fs::is_regular_file(resolved, ec))
    return err(what, ": external data '", location, "' is not a regular file");
  auto fsize = static_cast<int64_t>(fs::file_size(resolved, ec));
  if (ec) return err(what, ": cannot stat '", location, "'");
  if (length < 0) length = expected_bytes;
  if (length != expected_bytes)
    return err(what, ": external data length ", length, " does not match the ", expected_bytes,
               " bytes its dims need");
  auto end = checked_add(offset, length);
  if (!end || *end > fsize)
    return err(what, ": external data range [", offset, ", +", length, ") lies outside '", location,
               "' (", fsize, " bytes)");
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

namespace {
// One mapping per file, shared by every tensor over it (aliasing shared_ptrs).
struct Mapping {
  void* base = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (base) munmap(base, size);
  }
};

std::shared_ptr<Mapping> map_file(const fs::path& file, int64_t needed_bytes) {
  static std::mutex mu;
  static std::map<fs::path, std::weak_ptr<Mapping>> open;
  std::lock_guard<std::mutex> lock(mu);
  if (auto m = open[file].lock(); m && static_cast<int64_t>(m->size) >= needed_bytes) return m;
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st {};
  std::shared_ptr<Mapping> m;
  // A sparse file (fewer blocks than bytes) is read instead: it may claim terabytes it does not
  // hold, which the allocator then refuses with an error; a mapping would accept it.
  if (fstat(fd, &st) == 0 && st.st_size >= needed_bytes && st.st_size > 0 &&
      static_cast<int64_t>(st.st_blocks) * 512 >= st.st_size) {
    // MAP_PRIVATE: a write through a tensor (none is expected) changes a private copy of the
    // page, never the user's file. MAP_NORESERVE: a model larger than memory plus swap maps.
    void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_NORESERVE, fd, 0);
    if (p != MAP_FAILED) {
      m = std::make_shared<Mapping>();
      m->base = p;
      m->size = static_cast<size_t>(st.st_size);
      open[file] = m;
    }
  }
  ::close(fd);
  return m;
}

bool mapping_enabled() {
  const char* v = std::getenv("FERRITE_MMAP_WEIGHTS");
  return !(v && std::string(v) == "0");
}
}  // namespace

std::shared_ptr<uint8_t[]> map_external_data(const ExternalDataRange& range) {
  if (range.length < kMinMappedBytes || range.offset % kMappedAlignment != 0 || !mapping_enabled())
    return nullptr;
  auto end = checked_add(range.offset, range.length);
  if (!end) return nullptr;
  std::shared_ptr<Mapping> m = map_file(range.file, *end);
  if (!m) return nullptr;
  auto* bytes = static_cast<uint8_t*>(m->base) + range.offset;
  // The aliasing constructor: the tensor points into the mapping and keeps all of it alive.
  return std::shared_ptr<uint8_t[]>(std::move(m), bytes);
}

}  // namespace ferrite
