// `ferrite cts`: the backend conformance suite (src/cts, docs/cts.md).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cts/cts.h"
#include "support/result_dir.h"
#include "tools/ferrite/cli.h"

namespace ferrite::cli {

namespace {

using cts::Outcome;

const char* kCtsHelp = R"(usage: ferrite cts --device NAME [--filter REGEX] [--list] [--known FILE]
                   [--json FILE] [--verbose] [--quiet]

The backend conformance suite: every op of the op table (including the internal ferrite.* ops)
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

options:
  --device NAME   device under test (see `ferrite devices`)
  --filter REGEX  only cases whose name matches (names: Op/variant, fusion/pattern)
  --list          list the selected cases without running them
  --known FILE    known-unsupported list (default: tests/cts/NAME.known of the source tree when
                  it exists): lines `PATTERN  reason`, glob patterns over case names, `#`
                  comments; `*  expected: skeleton device` marks a device that supports nothing
  --json FILE     write every case result as JSON
  --verbose       print each case as it finishes
  --quiet         no progress line

exit status: 0 when every case passed or is unsupported, 1 on any FAIL or error outside the
known list, 2 on usage errors.
)";

std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

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
  std::ostringstream f;
  f << "{\n  \"device\": \"" << json_escape(device) << "\",\n  \"seconds\": " << num(s.seconds)
    << ",\n  \"sessions\": " << s.sessions << ",\n  \"totals\": {\"cases\": " << total.cases
    << ", \"pass\": " << total.pass << ", \"fail\": " << total.fail
    << ", \"unsupported\": " << total.unsupported << ", \"error\": " << total.error
    << ", \"skipped_ops\": " << s.skipped_ops.size() << "},\n  \"skipped_ops\": [";
  for (size_t i = 0; i < s.skipped_ops.size(); ++i)
    f << (i ? ", " : "") << "{\"op\": \"" << json_escape(s.skipped_ops[i].first)
      << "\", \"reason\": \"" << json_escape(s.skipped_ops[i].second) << "\"}";
  f << "],\n  \"cases\": [\n";
  for (size_t i = 0; i < s.cases.size(); ++i) {
    const auto& c = s.cases[i];
    f << "    {\"name\": \"" << json_escape(c.name) << "\", \"op\": \"" << json_escape(c.group)
      << "\", \"outcome\": \"" << cts::outcome_name(c.outcome)
      << "\", \"known\": " << (c.known ? "true" : "false")
      << ", \"max_abs_error\": " << num(c.max_abs_error)
      << ", \"max_rel_error\": " << num(c.max_rel_error)
      << ", \"first_bad_index\": " << c.first_bad_index << ", \"detail\": \""
      << json_escape(c.detail) << "\"}" << (i + 1 < s.cases.size() ? "," : "") << "\n";
  }
  f << "  ]\n}\n";
  return write_file_atomic(path, f.str());
}

}  // namespace

int cts_command(int argc, char** argv) {
  auto args = Args::parse(argc, argv, {"list", "verbose", "quiet", "help"},
                          {"device", "filter", "known", "json"});
  if (!args) {
    std::fprintf(stderr, "error: %s\n", args.status().message().c_str());
    return 2;
  }
  if (args->flag("help")) {
    std::fputs(kCtsHelp, stdout);
    return 0;
  }
  cts::RunConfig cfg;
  cfg.device = args->get("device");
  if (cfg.device.empty() || !args->positional().empty()) {
    std::fputs(kCtsHelp, stderr);
    return 2;
  }
  if (std::string f = args->get("filter"); !f.empty()) {
    try {
      cfg.filter.emplace(f, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      std::fprintf(stderr, "error: --filter '%s' is not a valid regex: %s\n", f.c_str(), e.what());
      return 2;
    }
  }
  if (args->flag("list")) {
    auto sel = [&](const std::string& n) {
      return !cfg.filter || std::regex_search(n, *cfg.filter);
    };
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
  std::string known = args->get("known");
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
  cfg.verbose = args->flag("verbose");
  cfg.progress = !args->flag("quiet");
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
  if (std::string j = args->get("json"); !j.empty()) {
    Status s = write_json(j, cfg.device, *result, total);
    if (!s) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return 2;
    }
  }
  return unexpected ? 1 : 0;
}

}  // namespace ferrite::cli
