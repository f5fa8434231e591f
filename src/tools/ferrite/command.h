// The `ferrite` subcommands on CLI11: each cmd_*.cpp registers its options on the app (bound to
// state its action owns) and returns the action, which main runs once the command line parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace ferrite::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
  int usage_status = 1;  // the exit status of a bad command line
};

// A subcommand of `ferrite`: `summary` is its line in `ferrite --help` and heads its own help,
// `footer` ends it. Unknown arguments are left in remaining() (main reports unknown options;
// each command its own extra positional arguments).
inline CLI::App* add_command(CLI::App& ferrite, const std::string& name, const std::string& summary,
                             const std::string& footer = "") {
  CLI::App* app = ferrite.add_subcommand(name, summary);
  app->allow_extras();
  if (!footer.empty()) app->footer(footer);
  return app;
}

// A single-valued option (given twice, the last one counts).
inline CLI::Option* add_value(CLI::App& app, const std::string& name, std::string& value,
                              const std::string& type, const std::string& help) {
  return app.add_option(name, value, help)
      ->type_name(type)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

// A repeatable option: every occurrence takes one value.
inline CLI::Option* add_repeated(CLI::App& app, const std::string& name,
                                 std::vector<std::string>& values, const std::string& type,
                                 const std::string& help) {
  return app.add_option(name, values, help)
      ->type_name(type)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

Command add_run_command(CLI::App& ferrite);
Command add_info_command(CLI::App& ferrite);
Command add_ops_command(CLI::App& ferrite);
Command add_test_onnx_command(CLI::App& ferrite);
Command add_bench_command(CLI::App& ferrite);
Command add_cts_command(CLI::App& ferrite);

}  // namespace ferrite::cli
