// Runs CTS cases: the cases of one op share one model (one compile on the device); when the
// device refuses a shared model, the batch is split in halves until each error is pinned to the
// cases that cause it.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <deque>

#include "cts/model_builder.h"
#include "frontend/onnx/importer.h"

namespace ferrite::cts {

namespace {

using Batch = std::vector<const Case*>;

// A whole-batch error: where it happened decides how a single case is classified.
struct BatchError {
  Status status;
  bool on_reference = false;  // the case itself is invalid (a generator bug)
};

struct BatchOutcome {
  std::optional<BatchError> error;
  std::vector<CaseResult> results;  // one per case when !error
};

Expected<std::unique_ptr<Session>> open_session(const std::string& bytes,
                                                const std::string& device) {
  FERRITE_ASSIGN_OR_RETURN(auto g, import_onnx_bytes(bytes, {}));
  return Session::from_graph(std::move(g), device);
}

BatchOutcome run_batch(const Batch& b, const RunConfig& cfg, int& sessions) {
  BatchOutcome out;
  auto fail = [&](Status s, bool ref) {
    out.error = BatchError{std::move(s), ref};
    return out;
  };
  auto bytes = build_model(b);
  if (!bytes) return fail(bytes.status(), true);
  auto ref = open_session(*bytes, "reference");
  if (!ref) return fail(ref.status(), true);
  ++sessions;
  auto dev = open_session(*bytes, cfg.device);
  if (!dev) return fail(dev.status(), false);

  out.results.resize(b.size());
  for (size_t k = 0; k < b.size(); ++k) {
    out.results[k].group = b[k]->group;
    out.results[k].name = b[k]->name;
  }
  size_t runs = run_count(b);
  for (size_t r = 0; r < runs; ++r) {
    auto inputs = make_inputs(b, r);
    if (!inputs) return fail(inputs.status(), true);
    auto expected = (*ref)->run(*inputs);
    if (!expected) return fail(expected.status(), true);
    auto actual = (*dev)->run(*inputs);
    if (!actual) return fail(actual.status(), false);
    if (actual->size() != expected->size())
      return fail(err("device returned ", actual->size(), " outputs, reference ", expected->size()),
                  false);
    size_t o = 0;
    for (size_t k = 0; k < b.size(); ++k) {
      CaseResult& res = out.results[k];
      for (const auto& name : b[k]->outputs) {
        const Tensor& e = (*expected)[o];
        const Tensor& a = (*actual)[o++];
        if (res.outcome != Outcome::kPass) continue;
        Tolerance tol = tolerance_for(e.dtype(), b[k]->group);
        tol.atol *= b[k]->tol_scale;
        tol.rtol *= b[k]->tol_scale;
        CaseResult probe = res;
        if (!compare_output(a, e, tol, probe)) {
          probe.outcome = Outcome::kFail;
          probe.bad_output = name;
          probe.detail = str_cat("output '", name, "'", runs > 1 ? str_cat(" (run ", r, ")") : "",
                                 ": ", probe.detail);
        }
        // Keep the largest errors seen over outputs and runs.
        probe.max_abs_error = std::max(probe.max_abs_error, res.max_abs_error);
        probe.max_rel_error = std::max(probe.max_rel_error, res.max_rel_error);
        res = probe;
      }
    }
  }
  return out;
}

CaseResult classify_error(const Case& c, const BatchError& e) {
  CaseResult r;
  r.group = c.group;
  r.name = c.name;
  if (e.on_reference) {
    r.outcome = Outcome::kError;
    r.detail = "invalid case (refused by reference): " + e.status.message();
  } else {
    r.outcome = e.status.is_unsupported() ? Outcome::kUnsupported : Outcome::kError;
    r.detail = e.status.message();
  }
  return r;
}

void apply_known(CaseResult& r, const RunConfig& cfg) {
  const KnownEntry* k = match_known(cfg.known, r.name);
  if (!k) return;
  r.known = true;
  if (r.outcome == Outcome::kPass) {
    r.detail = "passes although listed as known (" + k->reason + ")";
    return;
  }
  // A listed case that errors or mismatches is expected: report it as unsupported, with the
  // list's reason and what actually happened.
  r.detail = "known: " + k->reason + " [" + outcome_name(r.outcome) + ": " + r.detail + "]";
  r.outcome = Outcome::kUnsupported;
}

}  // namespace

Expected<SuiteResult> run_suite(const RunConfig& cfg) {
  auto probe = DeviceRegistry::global().create(cfg.device);
  if (!probe) return probe.status();
  auto t0 = std::chrono::steady_clock::now();
  SuiteResult suite;
  auto selected = [&](const std::string& name) {
    return !cfg.filter || std::regex_search(name, *cfg.filter);
  };

  std::vector<OpCases> ops = op_cases();
  std::vector<Case> fusion = fusion_cases();
  std::vector<Batch> batches;
  for (const OpCases& oc : ops) {
    if (!oc.skipped.empty()) {
      if (selected(oc.op + "/")) suite.skipped_ops.emplace_back(oc.op, oc.skipped);
      continue;
    }
    Batch shared;
    for (const Case& c : oc.cases) {
      if (!selected(c.name)) continue;
      if (c.standalone)
        batches.push_back({&c});
      else
        shared.push_back(&c);
    }
    if (!shared.empty()) batches.push_back(std::move(shared));
  }
  for (const Case& c : fusion)
    if (selected(c.name)) batches.push_back({&c});

  size_t total = 0;
  for (const auto& b : batches) total += b.size();
  size_t done = 0;
  bool tty = isatty(fileno(stderr));
  for (const Batch& batch : batches) {
    if (cfg.progress && tty) {
      std::fprintf(stderr, "\r[%zu/%zu] %-40s", done, total, batch.front()->group.c_str());
      std::fflush(stderr);
    }
    std::deque<Batch> work = {batch};
    while (!work.empty()) {
      Batch b = std::move(work.front());
      work.pop_front();
      BatchOutcome o = run_batch(b, cfg, suite.sessions);
      // A batch of cases the known list excuses needs no splitting: each gets the batch's error.
      bool all_known = true;
      for (const Case* c : b) all_known &= match_known(cfg.known, c->name) != nullptr;
      if (o.error && b.size() > 1 && !(all_known && !o.error->on_reference)) {
        size_t half = b.size() / 2;
        work.emplace_front(b.begin() + static_cast<std::ptrdiff_t>(half), b.end());
        work.emplace_front(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(half));
        continue;
      }
      if (o.error) {
        o.results.clear();
        for (const Case* c : b) o.results.push_back(classify_error(*c, *o.error));
      }
      for (CaseResult& r : o.results) {
        apply_known(r, cfg);
        if (cfg.verbose)
          std::fprintf(stderr, "%s%-11s %s%s%s\n", cfg.progress && tty ? "\r" : "",
                       outcome_name(r.outcome), r.name.c_str(), r.detail.empty() ? "" : "  ",
                       r.detail.c_str());
        suite.cases.push_back(std::move(r));
        ++done;
      }
    }
  }
  if (cfg.progress && tty) std::fprintf(stderr, "\r%60s\r", "");
  suite.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return suite;
}

}  // namespace ferrite::cts
