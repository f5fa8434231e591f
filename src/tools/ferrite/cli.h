// Shared pieces of the `ferrite` command-line tool.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/session.h"
#include "support/status.h"

namespace ferrite::cli {

// Reads DIR/input_*.pb in numeric order. With `decl` (the graph's inputs), file k is read as
// the kind decl[k] declares: sequences and optionals are SequenceProto / OptionalProto files.
Expected<std::vector<Session::NamedInput>> read_input_dir(
    const std::filesystem::path& dir, const std::vector<Value*>* decl = nullptr);
// Reads DIR/output_*.pb in numeric order (`decl`: the graph's outputs, as above).
Expected<std::vector<Session::NamedInput>> read_output_dir(
    const std::filesystem::path& dir, const std::vector<Value*>* decl = nullptr);
// Parses `name=random:2x3x4` against the graph's input of that name.
Expected<Session::NamedInput> random_input(const Graph& g, const std::string& spec);

// The device for a command given no --device (runtime's default_device(): cuda where a GPU
// answers, else cpu), announced with its reason in one line on stderr.
std::string announce_default_device();
// "f32[2,10] mean=.. min=.. max=.." over the numbers, then "nan=K" when K elements are NaN;
// "f32[2,10] all NaN" when nothing else is left.
std::string tensor_summary(const Tensor& t);

// "a,b,,c" -> {"a", "b", "c"}: the pass lists of --passes.
std::vector<std::string> split_list(const std::string& list);

}  // namespace ferrite::cli
