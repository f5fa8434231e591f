// `ferrite cts`: the backend conformance suite (src/cts, docs/cts.md).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "cts/cts.h"
#include "support/json.h"
#include "support/result_dir.h"
#include "tools/ferrite/cli.h"
#include "tools/ferrite/command.h"

namespace ferrite::cli {

namespace {

using cts::Outcome;

struct Row {
  int cases = 0, pass = 0, fail = 0, unsupported = 0, error = 0;
  void add(Outcome o) {
    ++cases;
    if (o == Outcome::kPass) ++pass;
    if (o == Outcome::kFail) ++fail;
    if (o == Outcome::kUnsupported) ++unsupported;
    if (o == Outcome::kError) ++error;
  }
};

Status write_json(const std::string& path, const std::string& device, const cts::SuiteResult& s,
                  const Row& total) {
  Json skipped = Json::array(), cases = Json::array();
  for (const auto& [op, reason] : s.skipped_ops)
    skipped.push_back({{"op", op}, {"reason", reason}});
  for (const auto& c : s.cases)
    cases.push_back({{"name", c.name},
                     {"op", c.group},
                     {"outcome", cts::outcome_name(c.outcome)},
                     {"known", c.known},
                     {"max_abs_error", json_number(c.max_abs_error)},
                     {"max_rel_error", json_number(c.max_rel_error)},
                     {"first_bad_index", c.first_bad_index},
                     {"detail", c.detail}});
  Json js = {{"device", device},
             {"seconds", json_number(s.seconds)},
             {"sessions", s.sessions},
             {"totals",
              {{"cases", total.cases},
               {"pass", total.pass},
               {"fail", total.fail},
               {"unsupported", total.unsupported},
               {"error", total.error},
               {"skipped_ops", s.skipped_ops.size()}}},
             {"skipped_ops", skipped},
             {"cases", cases}};
  return write_file_atomic(path, json_text(js));
}

struct CtsArgs {
  std::string device, filter, known, json;
  bool list = false, verbose = false, quiet = false;
};

// --list: the selected cases, without running them.
int list_cases(const cts::RunConfig& cfg) {
  auto sel = [&](const std::string& n) { return !cfg.filter || std::regex_search(n, *cfg.filter); };
  int n = 0;
  for (const auto& oc : cts::op_cases()) {
    if (!oc.skipped.empty() && sel(oc.op + "/"))
      std::printf("%-40s (skipped: %s)\n", oc.op.c_str(), oc.skipped.c_str());
    for (const auto& c : oc.cases)
      if (sel(c.name)) std::printf("%s\n", c.name.c_str()), ++n;
  }
  for (const auto& c : cts::fusion_cases())
    if (sel(c.name)) std::printf("%s\n", c.name.c_str()), ++n;
  std::fprintf(stderr, "%d cases\n", n);
  return 0;
}

int cts_command(const CtsArgs& args) {
  cts::RunConfig cfg;
  cfg.device = args.device;
  if (const std::string& f = args.filter; !f.empty()) {
    try {
      cfg.filter.emplace(f, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      std::fprintf(stderr, "error: --filter '%s' is not a valid regex: %s\n", f.c_str(), e.what());
      return 2;
    }
  }
  if (args.list) return list_cases(cfg);
  std::string known = args.known;
#ifdef FERRITE_SOURCE_DIR
  if (known.empty()) {
    std::filesystem::path p =
        std::filesystem::path(FERRITE_SOURCE_DIR) / "tests" / "cts" / (cfg.device + ".known");
    std::error_code ec;
    if (std::filesystem::exists(p, ec)) known = p.string();
  }
#endif
  if (!known.empty()) {
    auto k = cts::read_known_file(known);
    if (!k) {
      std::fprintf(stderr, "error: %s\n", k.status().message().c_str());
      return 2;
    }
    cfg.known = std::move(*k);
  }
  cfg.verbose = args.verbose;
  cfg.progress = !args.quiet;
  std::printf("ferrite cts: device %s, known-unsupported list %s\n", cfg.device.c_str(),
              known.empty() ? "(none)" : known.c_str());
  std::fflush(stdout);
  auto result = cts::run_suite(cfg);
  if (!result) {
    std::fprintf(stderr, "error: %s\n", result.status().message().c_str());
    return 2;
  }

  // Per-op table in suite order.
  std::vector<std::string> order;
  std::map<std::string, Row> rows;
  Row total;
  for (const auto& c : result->cases) {
    if (!rows.count(c.group)) order.push_back(c.group);
    rows[c.group].add(c.outcome);
    total.add(c.outcome);
  }
  std::printf("\n%-28s %6s %6s %6s %6s %6s  %s\n", "op", "cases", "pass", "FAIL", "unsup", "error",
              "tolerance");
  for (const auto& g : order) {
    const Row& r = rows[g];
    std::string note = cts::tolerance_note(g);
    std::printf("%-28s %6d %6d %6d %6d %6d  %s\n", g.c_str(), r.cases, r.pass, r.fail,
                r.unsupported, r.error, note.c_str());
  }
  for (const auto& [op, why] : result->skipped_ops)
    std::printf("%-28s %6s  skipped (%s)\n", op.c_str(), "-", why.c_str());
  std::printf("%-28s %6d %6d %6d %6d %6d\n", "total", total.cases, total.pass, total.fail,
              total.unsupported, total.error);

  int unexpected = 0, known_pass = 0;
  for (const auto& c : result->cases) {
    if (c.outcome == Outcome::kFail || c.outcome == Outcome::kError) {
      if (!unexpected++) std::printf("\nfailures:\n");
      std::printf("  %-5s %s: %s\n", cts::outcome_name(c.outcome), c.name.c_str(),
                  c.detail.c_str());
    }
    known_pass += c.known && c.outcome == Outcome::kPass;
  }
  if (known_pass)
    std::printf("\n%d case(s) listed as known-unsupported now pass (see --verbose)\n", known_pass);
  std::printf("\n%d cases, %d ops skipped (no generator), %d device sessions, %.1f s: %s\n",
              total.cases, static_cast<int>(result->skipped_ops.size()), result->sessions,
              result->seconds, unexpected ? "FAILED" : "ok");
  if (const std::string& j = args.json; !j.empty()) {
    Status s = write_json(j, cfg.device, *result, total);
    if (!s) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return 2;
    }
  }
  return unexpected ? 1 : 0;
}

}  // namespace

Command add_cts_command(CLI::App& ferrite) {
  auto a = std::make_shared<CtsArgs>();
  CLI::App* app = add_command(
      ferrite, "cts",
      "Backend conformance suite: every op of the op table and a set of fusion\n"
      "patterns on NAME against `reference`, with per-op tolerances and a\n"
      "known-unsupported list.",
      R"(The backend conformance suite: every op of the op table (including the internal ferrite.* ops)
with generated cases (shapes with broadcasting and symbolic dims, each dtype the op allows,
attribute variants, seeded random inputs in each op's valid range) and a set of fusion patterns
(pointwise chains over views, softmax/layernorm with prologues and epilogues, MatMul+bias+Gelu,
Conv+BN+Relu, an attention block, reductions with keepdims, dynamic batch at two sizes). Each
case runs on NAME (a Session with the device's default passes) and on `reference`, and the
outputs are compared with per-dtype tolerances (per-op overrides are listed in the table).

Outcome of a case:
  pass          within tolerance
  FAIL          wrong numbers: max abs/rel error and first bad index are reported
  unsupported   the device answered with an `unsupported` error, or the case matches the
                known-unsupported list (an error or mismatch there is expected)
  error         any other error (compile failure, run-time error, wrong output count)
Ops the suite has no input generator for are listed as skipped.

exit status: 0 when every case passed or is unsupported, 1 on any FAIL or error outside the
known list, 2 on usage errors.)");
  add_value(*app, "--device", a->device, "NAME", "device under test (see `ferrite devices`)");
  add_value(*app, "--filter", a->filter, "REGEX",
            "only cases whose name matches (names: Op/variant, fusion/pattern)");
  app->add_flag("--list", a->list, "list the selected cases without running them");
  add_value(*app, "--known", a->known, "FILE",
            "known-unsupported list (default: tests/cts/NAME.known of the source tree when\n"
            "it exists): lines `PATTERN  reason`, glob patterns over case names, `#`\n"
            "comments; `*  expected: skeleton device` marks a device that supports nothing");
  add_value(*app, "--json", a->json, "FILE", "write every case result as JSON");
  app->add_flag("--verbose", a->verbose, "print each case as it finishes");
  app->add_flag("--quiet", a->quiet, "no progress line");
  return {app,
          [app, a] {
            if (a->device.empty() || !app->remaining().empty()) {
              std::fputs(app->help("ferrite").c_str(), stderr);
              return 2;
            }
            return cts_command(*a);
          },
          2};
}

}  // namespace ferrite::cli
