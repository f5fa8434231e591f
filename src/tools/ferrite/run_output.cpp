#include "tools/ferrite/run_output.h"

#include <algorithm>
#include <cctype>

#include "frontend/onnx/tensor_proto.h"

namespace ferrite::cli {

namespace {

bool all_digits(const std::string& s, size_t begin, size_t end) {
  return end > begin && end - begin <= 9 &&
         std::all_of(s.begin() + static_cast<long>(begin), s.begin() + static_cast<long>(end),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

bool is_run_dir_name(const std::string& name) {
  return all_digits(name, 0, name.size());
}

// output_<i>.pb, or the temporary name ResultDir::write_file used for one (".output_<i>.pb.tmp-")
// left by a process that died mid-write.
bool is_result_file_name(const std::string& name) {
  const std::string prefix = "output_", suffix = ".pb";
  if (name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    return all_digits(name, prefix.size(), name.size() - suffix.size());
  return name.rfind(".output_", 0) == 0 && name.find(".pb.tmp-") != std::string::npos;
}

}  // namespace

Expected<RunOutput> RunOutput::start(const std::filesystem::path& dir) {
  auto opened = ResultDir::open(dir);
  if (!opened) return opened.status().with_context("--output-dir");
  RunOutput out(std::move(opened).value());
  const ResultDir& d = out.dir_;
  FERRITE_RETURN_IF_ERROR(d.remove_file("run.json"));
  FERRITE_ASSIGN_OR_RETURN(std::vector<std::string> names, d.list());
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    if (name.rfind(".run.json.tmp-", 0) == 0) FERRITE_RETURN_IF_ERROR(d.remove_file(name));
    if (!is_run_dir_name(name)) continue;
    FERRITE_ASSIGN_OR_RETURN(ResultDir::Kind kind, d.kind(name));
    if (kind != ResultDir::Kind::kDirectory && kind != ResultDir::Kind::kSymlink) continue;
    FERRITE_ASSIGN_OR_RETURN(ResultDir run_dir, d.subdir(name));  // refuses a symlink
    FERRITE_ASSIGN_OR_RETURN(std::vector<std::string> files, run_dir.list());
    for (const std::string& f : files)
      if (is_result_file_name(f)) FERRITE_RETURN_IF_ERROR(run_dir.remove_file(f));
    d.remove_dir_if_empty(name);
  }
  return out;
}

Status RunOutput::write_outputs(size_t run, const std::vector<std::string>& names,
                                const std::vector<Tensor>& outputs) const {
  FERRITE_ASSIGN_OR_RETURN(ResultDir run_dir, dir_.subdir(std::to_string(run)));
  for (size_t i = 0; i < outputs.size(); ++i) {
    FERRITE_ASSIGN_OR_RETURN(std::string bytes, encode_tensor_file(names[i], outputs[i]));
    FERRITE_RETURN_IF_ERROR(run_dir.write_file(str_cat("output_", i, ".pb"), bytes));
  }
  return Status::ok();
}

Status RunOutput::write_run_json(const std::string& json) const {
  return dir_.write_file("run.json", json);
}

}  // namespace ferrite::cli
