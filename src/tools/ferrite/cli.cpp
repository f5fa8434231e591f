#include "tools/ferrite/cli.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <regex>

#include "frontend/onnx/tensor_proto.h"

namespace ferrite::cli {

namespace fs = std::filesystem;

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos <= list.size();) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    if (end > pos) out.push_back(list.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

namespace {
Expected<std::vector<Session::NamedInput>> read_numbered(const fs::path& dir,
                                                         const std::string& prefix,
                                                         const std::vector<Value*>* decl) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return err("'", dir.string(), "' is not a directory");
  std::regex pattern(prefix + "_([0-9]+)\\.pb");
  std::vector<std::pair<long, fs::path>> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    std::string name = e.path().filename().string();
    // Numbers beyond 9 digits are not test-data indices; skip rather than overflow stol.
    if (std::regex_match(name, m, pattern) && m[1].length() <= 9)
      files.emplace_back(std::stol(m[1]), e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<Session::NamedInput> out;
  for (size_t i = 0; i < files.size(); ++i) {
    const fs::path& path = files[i].second;
    const Value* v = decl && i < decl->size() ? (*decl)[i] : nullptr;
    FERRITE_ASSIGN_OR_RETURN(NamedTensor t, v ? read_value_file(path, v->type.kind, v->type.dtype)
                                              : read_tensor_file(path));
    out.push_back({t.name, std::move(t.tensor)});
  }
  return out;
}
}  // namespace

Expected<std::vector<Session::NamedInput>> read_input_dir(const fs::path& dir,
                                                          const std::vector<Value*>* decl) {
  FERRITE_ASSIGN_OR_RETURN(auto v, read_numbered(dir, "input", decl));
  if (v.empty()) return err("no input_*.pb files in '", dir.string(), "'");
  return v;
}
Expected<std::vector<Session::NamedInput>> read_output_dir(const fs::path& dir,
                                                           const std::vector<Value*>* decl) {
  return read_numbered(dir, "output", decl);
}

Expected<Session::NamedInput> random_input(const Graph& g, const std::string& spec) {
  // The spec is quoted through printable_name: a control character or newline in it must not
  // split the one-line error.
  const std::string shown = printable_name(spec);
  auto eq = spec.find('=');
  if (eq == std::string::npos || spec.compare(eq + 1, 7, "random:") != 0)
    return err("--input expects name=random:DIMS (e.g. input=random:1x3x224x224), got '", shown,
               "'");
  std::string name = spec.substr(0, eq);
  const Value* decl = nullptr;
  for (const Value* v : g.inputs())
    if (v->name == name) decl = v;
  if (!decl) return err("--input: the model has no input named '", printable_name(name), "'");
  std::vector<int64_t> dims;
  std::string text = spec.substr(eq + 8);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find_first_of("x,", pos);
    std::string part = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos ||
        part.size() > 12)
      return err("--input: bad dimension '", printable_name(part), "' in '", shown, "'");
    dims.push_back(std::stoll(part));
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor t, Tensor::create(decl->type.dtype, dims));
  std::mt19937_64 rng(42);
  visit_dtype(t.dtype(), [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (is_float_v<T>) {
        p[i] = convert<T>(std::uniform_real_distribution<float>(-1.f, 1.f)(rng));
      } else if constexpr (std::is_same_v<T, bool>) {
        p[i] = rng() & 1;
      } else {
        // Small non-negative integers: valid token ids and masks for typical models.
        p[i] = static_cast<T>(rng() % 2 ? 1 : rng() % 100);
      }
    }
  });
  visit_float8(t.dtype(), [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i)
      p[i] = T(std::uniform_real_distribution<float>(-1.f, 1.f)(rng));
  });
  return Session::NamedInput{name, std::move(t)};
}

std::string announce_default_device() {
  std::string why;
  std::string device = default_device(&why);
  std::fprintf(stderr, "ferrite: no --device given: running on %s (%s)\n", device.c_str(),
               why.c_str());
  return device;
}

std::string tensor_summary(const Tensor& t) {
  std::string s = t.type_string();
  if (!t.is_tensor()) return s;  // a sequence or optional: its items are not summarised
  if (t.numel() == 0) return s + " (empty)";
  // NaN is counted, not summed: one NaN would make the mean NaN and min/max meaningless.
  double sum = 0, lo = INFINITY, hi = -INFINITY;
  int64_t nans = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.double_at(i);
    if (std::isnan(v)) {
      ++nans;
      continue;
    }
    sum += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (nans == t.numel()) return s + " all NaN";
  char buf[160];
  std::snprintf(buf, sizeof buf, " mean=%.6g min=%.6g max=%.6g",
                sum / static_cast<double>(t.numel() - nans), lo, hi);
  s += buf;
  if (nans) s += str_cat(" nan=", nans);
  return s;
}

}  // namespace ferrite::cli
