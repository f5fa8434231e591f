#include "tools/ferrite/run_output.h"

#include "frontend/onnx/tensor_proto.h"

namespace ferrite::cli {

Expected<RunOutput> RunOutput::start(const std::filesystem::path& dir) {
  auto opened = ResultDir::open(dir);
  if (!opened) return opened.status().with_context("--output-dir");
  return RunOutput(std::move(opened).value());
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
