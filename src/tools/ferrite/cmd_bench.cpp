// `ferrite bench`: compile time (cold and warm) and run latency of one model on one device,
// optionally interleaved with ONNX Runtime on the same inputs.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "frontend/onnx/tensor_proto.h"
#include "runtime/compare.h"
#include "support/cleanup.h"
#include "support/json.h"
#include "support/result_dir.h"
#include "tools/ferrite/cli.h"
#include "tools/ferrite/command.h"

namespace ferrite::cli {

namespace fs = std::filesystem;

namespace {
// The end of `ferrite bench --help`, after the options.
const char* kBenchFooter =
    R"(Measures how long MODEL takes to compile and to run on one device (any name `ferrite devices`
lists).

What is measured
  compile (cold)   import MODEL + Session::from_graph (the device's prepare/compile step), the
                   first time in this process
  compile (warm)   a fresh import of the same file + a second Session::from_graph in the same
                   process while the first session is alive: with a compile cache this is the
                   cache-hit time. (A persistent on-disk cache may make "cold" warm too.)
  first run        the first Session::run of the warm session (lazy first-use work shows here);
                   the timed runs below also use the warm session
  latency          K warm-up runs are discarded, then timed runs continue until there are at
                   least R runs AND at least S seconds of summed run time. One sample is one
                   Session::run call: input validation, execution, output allocation. Reported:
                   median, p10, p90 (linear interpolation between order statistics), min, mean
                   and max, in milliseconds.
  device time      devices with their own clock (cuda) also time the same number of runs with
                   CUDA events, the inputs resident on the device and the outputs left there
                   (one CUDA-graph launch per sample when the model is captured): the time of
                   the kernels alone, comparable with torch's do_bench. Not for host devices.

Comparison with ONNX Runtime (--compare onnxruntime)
  ONNX Runtime runs in a long-lived child process, scripts/ort_bench.py, started with the
  Python of $FERRITE_PYTHON, else <repo>/.venv/bin/python (found from the ferrite binary at
  <repo>/build*/bin/ferrite, or the source tree it was built from). Its session uses the CPU
  execution provider, graph_optimization_level ORT_ENABLE_ALL, intra_op_num_threads = --threads,
  inter_op_num_threads 1 and sequential execution. ferrite writes its input tensors to a temp
  directory; ORT reads the same files. Warm-up and timed runs alternate in blocks (ferrite,
  ORT, ferrite, ORT, ...) of about the same wall time, so machine noise hits both alike, with a
  50 ms pause before each block (FERRITE_BENCH_SETTLE_MS; not timed): ORT's intra-op workers
  keep spinning for a while after each run (its default) and would otherwise take the cores
  during ferrite's next block. Each runtime stops once it has R runs and S seconds. ORT is
  timed around session.run inside the child (pipe traffic is not counted). ORT's outputs are
  compared with ferrite's first-run outputs: the max abs diff is printed, and a warning if they
  differ beyond the tolerances of `ferrite test-onnx --help` (the benchmark then compares
  different computations).
  The summary line
      ferrite 12.3 ms | onnxruntime 10.1 ms | ratio (ort/ferrite) 0.82x
  gives medians; ratio = ORT median / ferrite median = ferrite's speedup over ORT: >1 means
  ferrite is faster, <1 slower.)";

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int fail(const Status& s) {
  std::fprintf(stderr, "error: %s\n", s.message().c_str());
  return 1;
}

// --NAME's value `s` as a number >= lo (an integer where `integer`); `def` when not given.
Expected<double> number_option(const std::string& s, const std::string& name, double def, double lo,
                               bool integer) {
  if (s.empty()) return def;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (errno || end == s.c_str() || *end || !std::isfinite(v) || v < lo || v > 1e9 ||
      (integer && v != std::floor(v)))
    return err("--", name, " expects ", integer ? "an integer" : "a number", " >= ", lo, ", got '",
               s, "'");
  return v;
}

struct Stats {
  size_t n = 0;
  double median = NAN, p10 = NAN, p90 = NAN, min = NAN, max = NAN, mean = NAN, total = 0;
};

Stats summarize(std::vector<double> s) {
  Stats st;
  st.n = s.size();
  if (s.empty()) return st;
  std::sort(s.begin(), s.end());
  auto pct = [&](double q) {
    double pos = q * static_cast<double>(s.size() - 1);
    size_t lo = static_cast<size_t>(std::floor(pos));
    size_t hi = std::min(lo + 1, s.size() - 1);
    return s[lo] + (s[hi] - s[lo]) * (pos - static_cast<double>(lo));
  };
  st.median = pct(0.5);
  st.p10 = pct(0.1);
  st.p90 = pct(0.9);
  st.min = s.front();
  st.max = s.back();
  for (double v : s) st.total += v;
  st.mean = st.total / static_cast<double>(s.size());
  return st;
}

// Statistics of samples in ms, after the fields of `head`.
Json stats_json(const Stats& st, const std::vector<double>& samples, Json head = Json::object()) {
  head["runs"] = st.n;
  head["median_ms"] = json_number(st.median * 1e3);
  head["p10_ms"] = json_number(st.p10 * 1e3);
  head["p90_ms"] = json_number(st.p90 * 1e3);
  head["min_ms"] = json_number(st.min * 1e3);
  head["mean_ms"] = json_number(st.mean * 1e3);
  head["max_ms"] = json_number(st.max * 1e3);
  head["total_seconds"] = json_number(st.total);
  Json& ms = head["samples_ms"] = Json::array();
  for (double v : samples) ms.push_back(json_number(v * 1e3));
  return head;
}

std::string ms(double seconds) {
  char buf[32];
  double v = seconds * 1e3;
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.1f ms" : v >= 1 ? "%.2f ms" : "%.3f ms", v);
  return buf;
}

// Progress on stderr: a rewritten \r line on a terminal, occasional plain lines otherwise.
class Progress {
 public:
  explicit Progress(bool quiet) : quiet_(quiet), tty_(isatty(2) != 0) {}
  ~Progress() { clear(); }
  void line(const std::string& s) {
    if (quiet_) return;
    clear();
    std::fprintf(stderr, "bench: %s\n", s.c_str());
  }
  void update(const std::string& s) {
    if (quiet_) return;
    double now = since(start_);
    if (tty_) {
      if (now - last_ < 0.1 && dirty_) return;
      std::fprintf(stderr, "\r\033[Kbench: %s", s.c_str());
      dirty_ = true;
    } else {
      if (now - last_ < 5) return;
      std::fprintf(stderr, "bench: %s\n", s.c_str());
    }
    std::fflush(stderr);
    last_ = now;
  }
  void clear() {
    if (dirty_) std::fprintf(stderr, "\r\033[K");
    dirty_ = false;
  }

 private:
  bool quiet_, tty_, dirty_ = false;
  Clock::time_point start_ = Clock::now();
  double last_ = 0;
};

// Candidate repository roots: the one the binary sits in (<repo>/build*/bin/ferrite) and the
// source tree it was configured from.
std::vector<fs::path> repo_roots() {
  std::vector<fs::path> roots;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) roots.push_back(exe.parent_path().parent_path().parent_path());
#ifdef FERRITE_SOURCE_DIR
  if (roots.empty() || !fs::equivalent(roots[0], FERRITE_SOURCE_DIR, ec))
    roots.emplace_back(FERRITE_SOURCE_DIR);
#endif
  return roots;
}

Expected<std::pair<fs::path, fs::path>> find_python_and_script() {
  std::error_code ec;
  fs::path python, script;
  std::string tried;
  if (const char* env = std::getenv("FERRITE_PYTHON"); env && *env) python = env;
  for (const fs::path& root : repo_roots()) {
    if (python.empty()) {
      fs::path p = root / ".venv" / "bin" / "python";
      tried += " " + p.string();
      if (fs::exists(p, ec)) python = p;
    }
    if (script.empty() && fs::is_regular_file(root / "scripts" / "ort_bench.py", ec))
      script = root / "scripts" / "ort_bench.py";
  }
  if (python.empty())
    return err(
        "--compare onnxruntime: no Python found; set FERRITE_PYTHON to a python with "
        "onnxruntime (tried",
        tried, ")");
  if (script.empty()) return err("--compare onnxruntime: scripts/ort_bench.py not found");
  return std::make_pair(python, script);
}

// scripts/ort_bench.py as a child process: we write commands to its stdin, read replies from
// its stdout; its stderr is ours.
class OrtChild {
 public:
  static Expected<std::unique_ptr<OrtChild>> start(const std::vector<std::string>& argv) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) return err("pipe: ", std::strerror(errno));
    if (pipe2(out, O_CLOEXEC) != 0) {
      close(in[0]);
      close(in[1]);
      return err("pipe: ", std::strerror(errno));
    }
    std::vector<char*> cargv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    // Built before fork: the child makes only async-signal-safe calls.
    std::string prefix = "error cannot run " + argv[0] + ": ";
    pid_t pid = fork();
    if (pid < 0) {
      for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
      return err("fork: ", std::strerror(errno));
    }
    if (pid == 0) {
      // The CLI blocks SIGINT/SIGTERM in its threads (interrupt.h); the child starts with them.
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      dup2(in[0], 0);
      dup2(out[1], 1);
      execv(cargv[0], cargv.data());
      const char* why = errno == ENOENT   ? "no such file\n"
                        : errno == EACCES ? "permission denied\n"
                                          : "exec failed\n";
      if (write(1, prefix.data(), prefix.size()) > 0 && write(1, why, std::strlen(why)) > 0) {
      }
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    auto c = std::unique_ptr<OrtChild>(new OrtChild());
    c->pid_ = pid;
    c->registration_ = std::make_unique<ChildRegistration>(pid);
    c->to_ = fdopen(in[1], "w");
    c->from_ = fdopen(out[0], "r");
    if (!c->to_ || !c->from_) return err("fdopen: ", std::strerror(errno));
    return c;
  }
  ~OrtChild() {
    if (to_) {
      std::fputs("quit\n", to_);
      std::fclose(to_);
    }
    if (from_) std::fclose(from_);
    free(line_);
    if (pid_ > 0) {
      if (broken_) kill(pid_, SIGKILL);
      int status;
      waitpid(pid_, &status, 0);
    }
  }

  // One reply line; "error ..." replies become errors.
  Expected<std::string> read_reply(const std::string& expect) {
    ssize_t n = getline(&line_, &cap_, from_);
    if (n <= 0) {
      broken_ = true;
      return err("onnxruntime child (scripts/ort_bench.py) exited unexpectedly");
    }
    std::string s(line_, static_cast<size_t>(n));
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    if (s.rfind("error ", 0) == 0) {
      broken_ = true;
      return err("onnxruntime: ", s.substr(6));
    }
    if (s.rfind(expect + " ", 0) != 0) {
      broken_ = true;
      return err("onnxruntime child: unexpected reply '", s.substr(0, 200), "'");
    }
    return s.substr(expect.size() + 1);
  }

  Expected<std::vector<double>> run(int n) {
    if (std::fprintf(to_, "run %d\n", n) < 0 || std::fflush(to_) != 0) {
      broken_ = true;
      return err("onnxruntime child: cannot send a command");
    }
    FERRITE_ASSIGN_OR_RETURN(std::string reply, read_reply("times"));
    std::istringstream is(reply);
    std::vector<double> t;
    for (double v; is >> v;) t.push_back(v);
    if (static_cast<int>(t.size()) != n) return err("onnxruntime child: expected ", n, " times");
    return t;
  }

 private:
  OrtChild() = default;
  pid_t pid_ = -1;
  std::unique_ptr<ChildRegistration> registration_;  // an interrupt terminates the child
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  char* line_ = nullptr;
  size_t cap_ = 0;
  bool broken_ = false;
};

// The child's "ready" reply: a JSON object describing its session (scripts/ort_bench.py), with
// the fields ferrite reads of their type.
Expected<Json> parse_ready(const std::string& text) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {
    return err("onnxruntime child: its ready reply is not valid JSON (", e.what(), "): '",
               text.substr(0, 200), "'");
  }
  if (!j.is_object() || !j.value("first_run_seconds", Json(0)).is_number() ||
      !j.value("version", Json("")).is_string())
    return err(
        "onnxruntime child: its ready reply is not a JSON object with a number "
        "first_run_seconds and a string version: '",
        text.substr(0, 200), "'");
  return j;
}

// One runtime's timed loop state.
struct Runner {
  using Fn = std::function<Expected<std::vector<double>>(int)>;  // n runs -> their seconds
  Runner(std::string n, Fn f) : name(std::move(n)), run(std::move(f)) {}
  std::string name;
  Fn run;
  std::vector<double> samples;
  double total = 0;
  double per_run = 0;  // current estimate, for block sizing
  bool done(size_t runs, double min_s) const { return samples.size() >= runs && total >= min_s; }
};

struct OutputDiff {
  std::string name, note;
  double max_abs_diff = 0;
  bool ok = true;
};

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  if (a.dims() != b.dims()) return INFINITY;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.double_at(i), y = b.double_at(i);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (x == y) continue;  // equal infinities too
    m = std::max(m, std::fabs(x - y));
    if (std::isnan(m)) m = INFINITY;
  }
  return m;
}

// Everything the report and the JSON say.
struct BenchReport {
  std::string model, device;
  RunOptions opts;
  double warmup = 0, min_s = 0;
  size_t min_runs = 0;
  std::vector<Session::NamedInput> inputs;
  double cold_import = 0, cold_prepare = 0, warm_import = 0, warm_prepare = 0;
  double first_run = 0, bench_wall = 0;
  const Runner* fer = nullptr;
  const Runner* ort = nullptr;  // --compare onnxruntime
  std::optional<DeviceTiming> dev_time;
  Json ort_ready;  // the child's "ready" reply
  std::vector<OutputDiff> diffs;
  bool outputs_match = true;
  double overall_diff = 0;
};

// Starts ONNX Runtime in a child on the same inputs (written to `tmp`) and compares its
// outputs with ferrite's first run; `ortr` then times the child.
Status start_onnxruntime(BenchReport& rep, const std::vector<Tensor>& first, const Graph& graph,
                         Progress& progress, TempDirectory& tmp, std::unique_ptr<OrtChild>& ort,
                         Runner& ortr) {
  FERRITE_ASSIGN_OR_RETURN(auto found, find_python_and_script());
  FERRITE_ASSIGN_OR_RETURN(tmp, TempDirectory::create("ferrite-bench-"));
  fs::path in_dir = tmp.path() / "inputs", out_dir = tmp.path() / "ort_outputs";
  std::error_code ec;
  fs::create_directories(in_dir, ec);
  if (ec) return err("cannot create '", in_dir.string(), "': ", ec.message());
  for (size_t i = 0; i < rep.inputs.size(); ++i)
    FERRITE_RETURN_IF_ERROR(write_tensor_file(in_dir / str_cat("input_", i, ".pb"),
                                              rep.inputs[i].name, rep.inputs[i].tensor));
  progress.line(
      str_cat("starting onnxruntime (", found.first.string(), " ", found.second.string(), ")"));
  FERRITE_ASSIGN_OR_RETURN(
      ort, OrtChild::start({found.first.string(), found.second.string(), "--model", rep.model,
                            "--inputs", in_dir.string(), "--output-dir", out_dir.string(),
                            "--threads", std::to_string(rep.opts.threads)}));
  FERRITE_ASSIGN_OR_RETURN(std::string ready, ort->read_reply("ready"));
  FERRITE_ASSIGN_OR_RETURN(rep.ort_ready, parse_ready(ready));
  ortr.per_run = rep.ort_ready.value("first_run_seconds", 0.0);
  OrtChild* child = ort.get();
  ortr.run = [child](int n) { return child->run(n); };

  FERRITE_ASSIGN_OR_RETURN(auto expected, read_output_dir(out_dir));
  if (expected.size() != first.size()) {
    rep.outputs_match = false;
    rep.overall_diff = INFINITY;
    rep.diffs.push_back(
        {"", str_cat("ferrite has ", first.size(), " outputs, onnxruntime ", expected.size()),
         INFINITY, false});
  }
  for (size_t i = 0; i < std::min(expected.size(), first.size()); ++i) {
    const Tensor& ours = first[i];
    const Tensor& theirs = expected[i].tensor;
    OutputDiff d{graph.outputs()[i]->name, "", 0, true};
    auto cmp = compare_tensors(ours, theirs, default_tolerance(theirs.dtype()));
    d.ok = cmp.ok;
    d.note = cmp.message;
    d.max_abs_diff = ours.dtype() == theirs.dtype() ? max_abs_diff(ours, theirs) : INFINITY;
    rep.outputs_match = rep.outputs_match && d.ok;
    rep.overall_diff = std::max(rep.overall_diff, d.max_abs_diff);
    rep.diffs.push_back(d);
  }
  return Status::ok();
}

// Before each block of an interleaved comparison: lets the other runtime's threads go idle.
// ONNX Runtime's intra-op workers keep spinning on their cores for a while after session.run
// returns (its default, session.intra_op.allow_spinning); on a 2-core host that spinning ran
// into the next ferrite block and took its cores (ResNet-50 batch 2: ferrite 99 ms interleaved
// against 78 ms alone, ORT 81 / 77 ms). The pause is outside every timed run.
void settle() {
  const char* v = std::getenv("FERRITE_BENCH_SETTLE_MS");
  const int ms = v ? std::atoi(v) : 50;
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// Warm-up, then timed blocks in alternation until every runtime has min_runs runs and min_s
// seconds. Returns the wall time of the timed part.
Expected<double> time_interleaved(const std::vector<Runner*>& runners, const BenchReport& rep,
                                  double block, Progress& progress) {
  for (Runner* r : runners) {
    if (rep.warmup == 0) continue;
    progress.line(str_cat("warm-up: ", static_cast<int>(rep.warmup), " ", r->name, " run(s)"));
    auto t = r->run(static_cast<int>(rep.warmup));
    if (!t) return t.status().with_context(r->name + " warm-up");
    r->per_run = summarize(*t).median;
  }
  const size_t min_runs = rep.min_runs;
  const double min_s = rep.min_s;
  auto status_text = [&] {
    std::string s;
    for (Runner* r : runners)
      s += str_cat(s.empty() ? "" : " | ", r->name, " ", r->samples.size(), "/", min_runs, " runs ",
                   std::round(r->total * 10) / 10, "/", min_s, " s");
    return s;
  };
  progress.line(str_cat("timing: at least ", min_runs, " runs and ", min_s, " s per runtime",
                        runners.size() > 1 ? ", interleaved" : ""));
  auto bench_start = Clock::now();
  for (bool any = true; any;) {
    any = false;
    for (Runner* r : runners) {
      if (r->done(min_runs, min_s)) continue;
      any = true;
      // About 0.2 s per block, but no more runs than still needed.
      double per = std::max(r->per_run, 1e-7);
      double need_runs = static_cast<double>(min_runs - std::min(min_runs, r->samples.size()));
      double need = std::max(need_runs, std::ceil((min_s - r->total) / per));
      double n = block > 0 ? block : std::round(0.2 / per);
      n = std::clamp(std::min(n, need), 1.0, 100000.0);
      if (runners.size() > 1) settle();
      auto t = r->run(static_cast<int>(n));
      if (!t) return t.status().with_context(r->name + " timed run");
      for (double v : *t) r->total += v;
      r->samples.insert(r->samples.end(), t->begin(), t->end());
      r->per_run = summarize(*t).median;
      progress.update(status_text());
    }
  }
  return since(bench_start);
}

void print_stats_line(const char* name, const Stats& st) {
  std::printf("%-12s median %s  p10 %s  p90 %s  min %s  mean %s  (%zu runs)\n", name,
              ms(st.median).c_str(), ms(st.p10).c_str(), ms(st.p90).c_str(), ms(st.min).c_str(),
              ms(st.mean).c_str(), st.n);
}

// The text report; returns the ratio onnxruntime / ferrite (NaN without --compare).
double print_report(const BenchReport& rep) {
  Stats fs_ = summarize(rep.fer->samples);
  std::string in_text;
  for (const auto& in : rep.inputs)
    in_text += str_cat(in_text.empty() ? "" : ", ", in.name, " ", in.tensor.type_string());
  const std::string threads = rep.opts.threads ? std::to_string(rep.opts.threads) : "default";
  std::printf("model        %s\n", rep.model.c_str());
  std::printf("device       %s (threads %s, precision %s)\n", rep.device.c_str(), threads.c_str(),
              std::string(precision_name(rep.opts.precision)).c_str());
  std::printf("inputs       %s\n", in_text.c_str());
  std::printf(
      "compile      cold %.3f s (import %.3f + prepare %.3f), warm %.3f s (import %.3f + "
      "prepare %.3f), first run %s\n",
      rep.cold_import + rep.cold_prepare, rep.cold_import, rep.cold_prepare,
      rep.warm_import + rep.warm_prepare, rep.warm_import, rep.warm_prepare,
      ms(rep.first_run).c_str());
  print_stats_line(rep.fer->name.c_str(), fs_);
  if (rep.ort) print_stats_line(rep.ort->name.c_str(), summarize(rep.ort->samples));
  if (rep.dev_time) {
    print_stats_line("device time", summarize(rep.dev_time->seconds));
    std::printf("             %s\n", rep.dev_time->method.c_str());
  }
  if (!rep.ort) return NAN;
  std::printf(
      "onnxruntime  %s, CPU EP, ORT_ENABLE_ALL, intra-op threads %s, inter-op 1, "
      "sequential\n",
      rep.ort_ready.value("version", std::string()).c_str(), threads.c_str());
  std::printf("outputs      max abs diff vs onnxruntime %.3g (%zu output(s), %s)\n",
              rep.overall_diff, rep.diffs.size(),
              rep.outputs_match ? "all within tolerance" : "MISMATCH");
  for (const auto& d : rep.diffs)
    if (!d.ok)
      std::fprintf(stderr, "warning: output '%s' differs from onnxruntime: %s\n", d.name.c_str(),
                   d.note.c_str());
  Stats os_ = summarize(rep.ort->samples);
  double ratio = os_.median / fs_.median;
  std::printf(ratio >= 0.1 ? "ferrite %s | onnxruntime %s | ratio (ort/ferrite) %.2fx\n"
                           : "ferrite %s | onnxruntime %s | ratio (ort/ferrite) %.2gx\n",
              ms(fs_.median).c_str(), ms(os_.median).c_str(), ratio);
  return ratio;
}

std::string bench_json(const BenchReport& rep, double ratio) {
  Json inputs = Json::array();
  for (const auto& in : rep.inputs)
    inputs.push_back({{"name", in.name}, {"type", in.tensor.type_string()}});
  auto compile = [](double import, double prepare) {
    return Json{{"import_seconds", json_number(import)},
                {"prepare_seconds", json_number(prepare)},
                {"total_seconds", json_number(import + prepare)}};
  };
  Json js = {{"model", rep.model},
             {"device", rep.device},
             {"precision", precision_name(rep.opts.precision)},
             {"threads", rep.opts.threads},
             {"warmup", static_cast<int64_t>(rep.warmup)},
             {"min_runs", rep.min_runs},
             {"min_seconds", json_number(rep.min_s)},
             {"inputs", inputs},
             {"compile",
              {{"cold", compile(rep.cold_import, rep.cold_prepare)},
               {"warm", compile(rep.warm_import, rep.warm_prepare)}}},
             {"first_run_seconds", json_number(rep.first_run)},
             {"timed_wall_seconds", json_number(rep.bench_wall)},
             {"ferrite", stats_json(summarize(rep.fer->samples), rep.fer->samples)}};
  if (rep.dev_time)
    js["device_time"] = stats_json(summarize(rep.dev_time->seconds), rep.dev_time->seconds,
                                   {{"method", rep.dev_time->method}});
  if (rep.ort) {
    js["onnxruntime"] =
        stats_json(summarize(rep.ort->samples), rep.ort->samples, {{"session", rep.ort_ready}});
    Json per_output = Json::array();
    for (const auto& d : rep.diffs)
      per_output.push_back({{"name", d.name},
                            {"max_abs_diff", json_number(d.max_abs_diff)},
                            {"within_tolerance", d.ok}});
    js["outputs"] = {{"match", rep.outputs_match},
                     {"max_abs_diff", json_number(rep.overall_diff)},
                     {"per_output", per_output}};
    js["ratio_ort_over_ferrite"] = json_number(ratio);
    js["ratio_definition"] =
        "onnxruntime median / ferrite median: ferrite's speedup over onnxruntime (>1: ferrite "
        "faster)";
  }
  return json_text(js);
}

// The command line of `ferrite bench`.
struct BenchArgs {
  std::string model, device, threads, warmup, runs, min_seconds, block, compare, json, precision,
      trace;
  std::vector<std::string> inputs, input;
  bool quiet = false;
};

int bench_command(const BenchArgs& args) {
  BenchReport rep;
  rep.model = args.model;
  rep.device = args.device;
  if (rep.device.empty()) rep.device = announce_default_device();
  auto threads = number_option(args.threads, "threads", 0, 0, true);
  auto warmup = number_option(args.warmup, "warmup", 2, 0, true);
  auto runs = number_option(args.runs, "runs", 10, 1, true);
  auto min_s = number_option(args.min_seconds, "min-seconds", 1.0, 0, false);
  auto block = number_option(args.block, "block", 0, 0, true);
  for (const auto* e : {&threads, &warmup, &runs, &min_s, &block})
    if (!*e) return fail(e->status());
  if (args.inputs.size() > 1) return fail(err("bench takes one --inputs DIR"));
  if (!args.inputs.empty() && !args.input.empty())
    return fail(err("give either --inputs DIR or --input SPEC, not both"));
  if (args.inputs.empty() && args.input.empty())
    return fail(err("no inputs: give --inputs DIR or --input NAME=random:DIMS"));
  const std::string& compare = args.compare;
  if (!compare.empty() && compare != "onnxruntime")
    return fail(err("--compare supports only 'onnxruntime', got '", compare, "'"));
  const std::string& json_path = args.json;
  rep.warmup = *warmup;
  rep.min_runs = static_cast<size_t>(*runs);
  rep.min_s = *min_s;
  rep.opts.threads = static_cast<int>(*threads);
  if (!args.trace.empty()) rep.opts.trace = std::filesystem::path(args.trace);
  if (const std::string& p = args.precision; !p.empty()) {
    auto prec = precision_from_name(p);
    if (!prec) return fail(err("--precision expects f32, tf32, bf16 or fp16, got '", p, "'"));
    rep.opts.precision = *prec;
  }
  Progress progress(args.quiet);
  signal(SIGPIPE, SIG_IGN);  // a dead child must give an error, not kill us

  // Compile, cold then warm (the cold session stays alive while the warm one is built).
  progress.line(str_cat("cold compile of ", rep.model, " on ", rep.device));
  auto c0 = Clock::now();
  auto g1 = import_onnx_file(rep.model);
  if (!g1) return fail(g1.status());
  rep.cold_import = since(c0);
  auto c1 = Clock::now();
  auto cold = Session::from_graph(std::move(g1).value(), rep.device, rep.opts);
  if (!cold) return fail(cold.status());
  rep.cold_prepare = since(c1);
  progress.line("warm compile");
  auto w0 = Clock::now();
  auto g2 = import_onnx_file(rep.model);
  if (!g2) return fail(g2.status());
  rep.warm_import = since(w0);
  auto w1 = Clock::now();
  auto warm = Session::from_graph(std::move(g2).value(), rep.device, rep.opts);
  if (!warm) return fail(warm.status());
  rep.warm_prepare = since(w1);
  cold->reset();
  Session& session = **warm;
  const Graph& graph = session.graph();

  std::vector<Session::NamedInput>& inputs = rep.inputs;
  if (!args.inputs.empty()) {
    auto in = read_input_dir(args.inputs.back());
    if (!in) return fail(in.status());
    inputs = std::move(in).value();
  } else {
    for (const auto& spec : args.input) {
      auto in = random_input(graph, spec);
      if (!in) return fail(in.status());
      inputs.push_back(std::move(in).value());
    }
  }

  progress.line("first run");
  auto f0 = Clock::now();
  auto first = session.run(inputs);
  if (!first) return fail(first.status().with_context("first run"));
  rep.first_run = since(f0);

  Runner fer{"ferrite", [&](int n) -> Expected<std::vector<double>> {
               std::vector<double> t;
               for (int i = 0; i < n; ++i) {
                 auto r0 = Clock::now();
                 auto outs = session.run(inputs);
                 double s = since(r0);
                 if (!outs) return outs.status();
                 t.push_back(s);
               }
               return t;
             }};
  fer.per_run = rep.first_run;
  std::vector<Runner*> runners{&fer};
  rep.fer = &fer;

  TempDirectory tmp;  // registered: an interrupt removes it too
  std::unique_ptr<OrtChild> ort;
  Runner ortr{"onnxruntime", nullptr};
  if (!compare.empty()) {
    Status st = start_onnxruntime(rep, *first, graph, progress, tmp, ort, ortr);
    if (!st) return fail(st);
    runners.push_back(&ortr);
    rep.ort = &ortr;
  }
  auto wall = time_interleaved(runners, rep, *block, progress);
  if (!wall) return fail(wall.status());
  rep.bench_wall = *wall;
  // Devices with their own clock also time runs with the inputs resident on the device (CUDA
  // events): the kernels' time without the host's input and output copies.
  {
    double per = std::max(summarize(fer.samples).median, 1e-6);
    int n = static_cast<int>(std::clamp(std::max(*runs, std::ceil(*min_s / per)), 1.0, 100000.0));
    progress.line(str_cat("device-timed runs: ", n));
    auto t = session.time_resident(inputs, n);
    if (t)
      rep.dev_time = std::move(t).value();
    else if (!t.status().is_unsupported())
      return fail(t.status().with_context("device-timed runs"));
  }
  progress.clear();
  ort.reset();  // quit the child before reporting

  double ratio = print_report(rep);
  if (!json_path.empty()) {
    if (Status st = write_file_atomic(json_path, bench_json(rep, ratio)); !st) return fail(st);
  }
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& ferrite) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* app =
      add_command(ferrite, "bench",
                  "Compile time (cold and warm) and run latency (median, p10, p90, min,\n"
                  "mean), optionally interleaved with ONNX Runtime on the same inputs with an\n"
                  "output check and a speed ratio.",
                  kBenchFooter);
  app->add_option("MODEL", a->model, "the ONNX model file")->type_name("");
  add_repeated(*app, "--inputs", a->inputs, "DIR",
               "one input set: DIR/input_*.pb, matched to the model's inputs by name,\n"
               "else by position");
  add_repeated(*app, "--input", a->input, "SPEC",
               "NAME=random:DIMS, e.g. input=random:1x3x224x224 (repeat per input;\n"
               "seeded, so every bench sees the same values)");
  add_value(*app, "--device", a->device, "NAME",
            "default: the best usable device, cuda where a GPU answers, else cpu (said\n"
            "on stderr). `reference` is the unoptimised correctness oracle, not a\n"
            "performance device: its numbers are a baseline only");
  add_value(*app, "--threads", a->threads, "N",
            "RunOptions.threads for ferrite and intra_op_num_threads for ONNX Runtime\n"
            "(default 0: each runtime's own default)");
  add_value(*app, "--trace", a->trace, "FILE",
            "a Chrome / Perfetto trace (JSON) of every step of ferrite's runs (times\n"
            "each step, so the run times include that overhead)");
  add_value(*app, "--precision", a->precision, "P",
            "f32 (default), tf32, bf16 or fp16 for ferrite (see `ferrite run --help`);\n"
            "ONNX Runtime always runs the f32 model");
  add_value(*app, "--warmup", a->warmup, "K", "warm-up runs per runtime (default 2)");
  add_value(*app, "--runs", a->runs, "R", "minimum timed runs per runtime (default 10)");
  add_value(*app, "--min-seconds", a->min_seconds, "S",
            "minimum summed run time per runtime (default 1; 0: stop after R runs)");
  add_value(*app, "--block", a->block, "B",
            "runs per block (default: about 0.2 s of runs, re-estimated as it goes)");
  add_value(*app, "--compare", a->compare, "onnxruntime",
            "also time ONNX Runtime on the same inputs (see below)");
  add_value(*app, "--json", a->json, "FILE", "write every number (including all samples) as JSON");
  app->add_flag("--quiet", a->quiet, "no progress on stderr");
  return {app, [app, a] {
            if (a->model.empty() || !app->remaining().empty()) {
              std::fputs(app->help("ferrite").c_str(), stderr);
              return fail(Status::error("bench takes exactly one MODEL"));
            }
            return bench_command(*a);
          }};
}

}  // namespace ferrite::cli
