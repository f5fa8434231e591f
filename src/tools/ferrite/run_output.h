// Where `ferrite run` puts its results: OUT/<k>/output_<i>.pb for run k and OUT/run.json, written
// last, so that run.json exists only when every output of this invocation was written.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "support/result_dir.h"

namespace ferrite::cli {

class RunOutput {
 public:
  // Opens (creating) `dir` and clears what an earlier run left there: run.json first (an
  // interrupted rerun then leaves no old "pass" behind), then every output_<i>.pb and leftover
  // temporary file in the numbered subdirectories, and numbered subdirectories left empty.
  // Symbolic links inside `dir` are refused, never followed.
  static Expected<RunOutput> start(const std::filesystem::path& dir);

  // OUT/<run>/output_<i>.pb for each output (names[i] is its graph output name).
  Status write_outputs(size_t run, const std::vector<std::string>& names,
                       const std::vector<Tensor>& outputs) const;
  Status write_run_json(const std::string& json) const;

 private:
  explicit RunOutput(ResultDir dir) : dir_(std::move(dir)) {}
  ResultDir dir_;
};

}  // namespace ferrite::cli
