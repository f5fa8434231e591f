// ferrite: the command-line entry point. Each command registers itself on the CLI11 app
// (tools/ferrite/command.h); main parses the command line once and runs the chosen command.
#include <cstdio>
#include <string>

#include "tools/ferrite/cli.h"
#include "tools/ferrite/command.h"
#include "tools/ferrite/interrupt.h"

namespace ferrite::cli {
namespace {

// `ferrite devices [--verbose]`: every registered device, where it came from, and (verbose) its
// properties; plugins found but refused, with the reason.
int devices_command(bool verbose) {
  auto& reg = DeviceRegistry::global();
  for (const auto& name : reg.names()) {
    auto d = reg.create(name);
    if (!d) {
      std::printf("%-12s unavailable: %s [%s]\n", name.c_str(), d.status().message().c_str(),
                  reg.origin(name).c_str());
      continue;
    }
    std::printf("%-12s %s [%s]\n", name.c_str(), (*d)->description().c_str(),
                reg.origin(name).c_str());
    if (verbose) std::printf("%s", (*d)->properties().describe().c_str());
  }
  for (const auto& r : reg.refused())
    std::printf("refused plugin %s: %s\n", r.path.c_str(), r.reason.c_str());
  // What `run` and `bench` (and the C API) take when no device is named.
  std::string why;
  std::string def = default_device(&why);
  std::printf("default: %s (%s)\n", def.c_str(), why.c_str());
  return 0;
}

Command add_devices_command(CLI::App& ferrite) {
  auto verbose = std::make_shared<bool>(false);
  CLI::App* app =
      add_command(ferrite, "devices",
                  "List the available devices (built in and plugins), where each comes\n"
                  "from, and with --verbose their properties. Plugins are found on\n"
                  "FERRITE_BACKEND_PATH and <prefix>/lib/ferrite/backends.");
  app->add_flag("-v,--verbose", *verbose, "also print each device's properties");
  return {app,
          [app, verbose] {
            if (!app->remaining().empty()) {
              std::fputs(app->help("ferrite").c_str(), stderr);
              return 2;
            }
            return devices_command(*verbose);
          },
          2};
}

}  // namespace
}  // namespace ferrite::cli

int main(int argc, char** argv) {
  using namespace ferrite::cli;
  // Before any thread starts: they inherit the blocked SIGINT/SIGTERM.
  install_interrupt_handling();
  CLI::App app{"ferrite — a deep-learning compiler and runtime", "ferrite"};
  app.get_formatter()->column_width(22);
  app.require_subcommand(1);
  const std::vector<Command> commands = {add_run_command(app),       add_info_command(app),
                                         add_test_onnx_command(app), add_bench_command(app),
                                         add_cts_command(app),       add_ops_command(app),
                                         add_devices_command(app)};
  // After the commands: a subcommand starts with its parent's footer.
  app.footer("Run `ferrite <command> --help` for the options of one command.");
  const std::string first = argc < 2 ? "" : argv[1];
  if (argc < 2 || first == "help") {
    std::fputs(app.help().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const Command* cmd = nullptr;
  for (const Command& c : commands)
    if (c.app->check_name(first)) cmd = &c;
  if (!cmd && first != "--help" && first != "-h") {
    std::fprintf(stderr, "error: unknown command '%s' (see ferrite --help)\n", first.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return cmd ? cmd->usage_status : 2;
  }
  if (!cmd) return 2;  // not reached: parse answers --help and -h
  // Arguments that look like options but are none of this command's.
  for (std::string extra : cmd->app->remaining()) {
    if (extra.size() < 2 || extra[0] != '-') continue;
    std::fprintf(stderr, "error: unknown option '%s' (see --help)\n",
                 extra.substr(0, extra.find('=')).c_str());
    return cmd->usage_status;
  }
  return cmd->run();
}
