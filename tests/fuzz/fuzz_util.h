// Shared by the libFuzzer harnesses (tests/fuzz): what counts as a finding beyond what the
// sanitizers report, and small helpers. A finding prints its reason and traps, so libFuzzer keeps
// the input as a crash artifact.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "runtime/session.h"
#include "support/status.h"

namespace ferrite::fuzz {

// A broken contract on this input: print `what` and trap.
[[noreturn]] void finding(const std::string& what);

// The error contract for user input (docs/reliability.md): an error is a value whose message is
// one non-empty line (the CLI prints exactly one `error:` line).
void check_error(const Status& s, const char* stage);

// A directory for this process's scratch files, created on first use and removed at exit.
const std::filesystem::path& scratch_dir();

// Writes `bytes` to `path` (truncating); a failure is a harness problem, so it aborts.
void write_file(const std::filesystem::path& path, const std::string& bytes);

// Inputs for every graph input (symbolic and unknown dims bound to 2; fewer than
// `max_elements` in all), filled from `seed` with small values: floats k/4 for k in -8..8
// (exact in every float format, so sums and products rarely round), integers 0..3 (valid
// indices and no integer overflow, which the integer kernels leave to the model). nullopt when
// an input has unknown rank or the inputs are too large.
std::optional<std::vector<Session::NamedInput>> small_inputs(const Graph& g, uint64_t seed,
                                                             int64_t max_elements);

}  // namespace ferrite::fuzz
