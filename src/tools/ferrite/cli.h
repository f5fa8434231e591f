// Shared pieces of the `ferrite` command-line tool.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "runtime/session.h"
#include "support/status.h"

namespace ferrite::cli {

// A tiny argument parser: `--flag`, `--key value` (repeatable) and positional arguments.
class Args {
 public:
  // `flags` take no value; everything else starting with "--" takes one.
  static Expected<Args> parse(int argc, char** argv, const std::vector<std::string>& flags,
                              const std::vector<std::string>& options);
  bool flag(const std::string& name) const { return flags_.count(name) != 0; }
  std::vector<std::string> all(const std::string& name) const;
  std::string get(const std::string& name, const std::string& def = "") const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::map<std::string, bool> flags_;
  std::vector<std::string> positional_;
};

// Reads DIR/input_*.pb in numeric order.
Expected<std::vector<Session::NamedInput>> read_input_dir(const std::filesystem::path& dir);
// Reads DIR/output_*.pb in numeric order.
Expected<std::vector<Session::NamedInput>> read_output_dir(const std::filesystem::path& dir);
// Parses `name=random:2x3x4` against the graph's input of that name.
Expected<Session::NamedInput> random_input(const Graph& g, const std::string& spec);

std::string json_escape(const std::string& s);
// The device for a command given no --device (runtime's default_device(): cuda where a GPU
// answers, else cpu), announced with its reason in one line on stderr.
std::string announce_default_device();
// "f32[2,10] mean=.. min=.. max=.." over the numbers, then "nan=K" when K elements are NaN;
// "f32[2,10] all NaN" when nothing else is left.
std::string tensor_summary(const Tensor& t);

int run_command(int argc, char** argv);
int info_command(int argc, char** argv);
int test_onnx_command(int argc, char** argv);
int ops_command(int argc, char** argv);
int bench_command(int argc, char** argv);
int cts_command(int argc, char** argv);

}  // namespace ferrite::cli
