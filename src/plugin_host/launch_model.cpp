#include "plugin_host/launch_model.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "memory/lowered_memory.h"
#include "memory/planner.h"
#include "ops/context.h"
#include "ops/op_schema.h"
#include "support/checked_math.h"
#include "tune/autotuner.h"

namespace ferrite {

namespace {

bool log_enabled(const char* topic) {
  const char* v = std::getenv("FERRITE_LOG");
  return v && (std::string(v).find(topic) != std::string::npos || std::string(v) == "all");
}

// A buffer's storage for one run.
struct DeviceValue {
  void* ptr = nullptr;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  bool owned = false;  // allocated for this run (freed at its last use); else arena or constant
  // Callers check the size first (place: too_large); unsigned, so never undefined.
  size_t bytes() const {
    size_t n = dtype_size(dtype);
    for (int64_t d : dims) n *= static_cast<size_t>(d);
    return n;
  }
  // Whether the size overflows (dims from the model: an error, not undefined behaviour).
  bool too_large() const {
    int64_t n = static_cast<int64_t>(dtype_size(dtype));
    for (int64_t d : dims)
      if (d < 0 || __builtin_mul_overflow(n, d, &n)) return true;
    return false;
  }
};

class LaunchModel : public PreparedModel {
 public:
  LaunchModel(const Graph& g, LoweredGraph lg, std::unique_ptr<LoadedModule> module,
              std::shared_ptr<BackendParts> parts, LaunchFn launch, bool autotune)
      : graph_(g), lg_(std::move(lg)), module_(std::move(module)), parts_(std::move(parts)),
        launch_(std::move(launch)), launches_(parts_->properties, *parts_->heuristics, autotune),
        planner_({}, {}) {
    last_use_.assign(lg_.buffers.size(), -1);
    for (size_t i = 0; i < lg_.steps.size(); ++i) {
      const Step& s = lg_.steps[i];
      const std::vector<int>& ins = s.kind == Step::Kind::kKernel ? s.kernel.input_buffers : s.inputs;
      for (int b : ins)
        if (b >= 0) last_use_[b] = static_cast<int>(i);
    }
    for (int b : lg_.outputs) last_use_[b] = INT32_MAX;
    int unplanned = 0;
    auto requests = arena_requests(lg_, last_use_, request_of_buffer_, buffer_of_request_, unplanned);
    // Every arena slot keeps the device's allocation alignment (a power of two by the spec).
    for (auto& r : requests) r.alignment = std::max<int64_t>(r.alignment, align());
    planner_ = SymbolicMemoryPlanner(std::move(requests), lg_.symbols);
  }

  ~LaunchModel() override {
    DeviceRuntime& rt = *parts_->runtime;
    for (auto& [b, v] : constants_) rt.free(v.ptr);
    if (arena_) rt.free(arena_);
  }

  Status init() {
    for (const Step& s : lg_.steps) {
      if (s.kind != Step::Kind::kKernel) {
        fns_.push_back(nullptr);
        continue;
      }
      void* fn = module_->symbol(s.kernel.name);
      if (!fn) return err(parts_->properties.name, ": kernel '", s.kernel.name,
                          "' is missing from the compiled module");
      fns_.push_back(fn);
    }
    // Constants go up once.
    for (size_t b = 0; b < lg_.buffers.size(); ++b) {
      if (lg_.buffers[b].kind != Buffer::Kind::kConstant) continue;
      FERRITE_ASSIGN_OR_RETURN(DeviceValue v, upload(*lg_.buffers[b].value->constant));
      v.owned = false;
      constants_[static_cast<int>(b)] = v;
    }
    return Status::ok();
  }

  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<DeviceValue> vals(lg_.buffers.size());
    Status st = run_steps(inputs, vals);
    std::vector<Tensor> out;
    if (st.is_ok()) {
      for (int b : lg_.outputs) {
        auto t = download(vals[b]);
        if (!t) {
          st = t.status();
          break;
        }
        out.push_back(std::move(t).value());
      }
    }
    for (auto& v : vals)
      if (v.owned) parts_->runtime->free(v.ptr);
    if (!st.is_ok()) return st;
    return out;
  }

  ModelStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    ModelStats s;
    s.memory = memory_;
    s.tuning = launches_.stats();
    return s;
  }

 private:
  size_t align() const {
    int64_t a = parts_->properties.alignment;
    return a > 0 && (a & (a - 1)) == 0 ? static_cast<size_t>(a) : 256;
  }

  Expected<DeviceValue> upload(const Tensor& t) {
    DeviceValue v;
    v.dtype = t.dtype();
    v.dims = t.dims();
    v.owned = true;
    FERRITE_ASSIGN_OR_RETURN(v.ptr, parts_->runtime->allocate(t.nbytes(), align()));
    Status s = parts_->runtime->copy_to_device(v.ptr, t.raw(), t.nbytes());
    if (!s.is_ok()) {
      parts_->runtime->free(v.ptr);
      return s;
    }
    return v;
  }

  Expected<Tensor> download(const DeviceValue& v, const std::vector<int64_t>* view = nullptr) {
    // Sizes come from the model and its inputs: an impossible allocation is an error.
    FERRITE_ASSIGN_OR_RETURN(Tensor t,
                             Tensor::create_uninitialized(v.dtype, view ? *view : v.dims));
    if (t.nbytes() > v.bytes()) return err("view larger than its buffer");
    FERRITE_RETURN_IF_ERROR(parts_->runtime->copy_to_host(t.raw(), v.ptr, t.nbytes()));
    return t;
  }

  Expected<std::vector<int64_t>> eval_dims(const std::vector<Dim>& dims, const SymBindings& bind) {
    std::vector<int64_t> out;
    for (const Dim& d : dims) {
      auto v = d.expr().evaluate(bind);
      if (!v || *v < 0) return err(parts_->properties.name, ": cannot evaluate dim ", d.to_string());
      out.push_back(*v);
    }
    return out;
  }

  // Storage for buffer b: its arena slot when planned and large enough, else a fresh allocation.
  Expected<DeviceValue> place(int b, DType dtype, std::vector<int64_t> dims) {
    DeviceValue v;
    v.dtype = dtype;
    v.dims = std::move(dims);
    if (v.too_large())
      return err("value of dims ", dims_to_string(v.dims), " is too large to allocate");
    int r = request_of_buffer_.empty() ? -1 : request_of_buffer_[b];
    if (plan_ && r >= 0 && static_cast<int64_t>(v.bytes()) <= plan_->bytes[r]) {
      v.ptr = static_cast<char*>(arena_) + plan_->offsets[r];
      return v;
    }
    FERRITE_ASSIGN_OR_RETURN(v.ptr, parts_->runtime->allocate(v.bytes(), align()));
    v.owned = true;
    return v;
  }

  Status run_steps(const std::vector<Tensor>& inputs, std::vector<DeviceValue>& vals) {
    SymBindings bind;
    for (size_t i = 0; i < graph_.inputs().size(); ++i) {
      const Shape& s = graph_.inputs()[i]->type.shape;
      if (!s.rank_known()) continue;
      for (size_t d = 0; d < s.rank() && d < inputs[i].rank(); ++d)
        if (s[d].is_known() && s[d].expr().is_symbol()) {
          std::vector<std::string> names;
          s[d].expr().collect_symbols(names);
          bind[names[0]] = inputs[i].dim(d);
        }
    }
    std::vector<int64_t> syms;
    for (const auto& name : lg_.symbols) {
      auto it = bind.find(name);
      if (it == bind.end())
        return err(parts_->properties.name, ": shape symbol '", name, "' is not bound by any input");
      syms.push_back(it->second);
    }
    FERRITE_RETURN_IF_ERROR(plan_arena(syms));
    for (size_t i = 0; i < lg_.inputs.size(); ++i) {
      FERRITE_ASSIGN_OR_RETURN(vals[lg_.inputs[i]], upload(inputs[i]));
    }
    for (auto& [b, v] : constants_) vals[b] = v;

    launches_.begin_run(lg_.kernels);
    struct EndRun {
      LaunchChooser& l;
      ~EndRun() { l.end_run(); }
    } end_run{launches_};
    for (size_t si = 0; si < lg_.steps.size(); ++si) {
      const Step& s = lg_.steps[si];
      if (s.kind == Step::Kind::kKernel)
        FERRITE_RETURN_IF_ERROR(run_kernel(si, s.kernel, fns_[si], bind, syms, vals));
      else
        FERRITE_RETURN_IF_ERROR(run_on_host(s, bind, vals));
      // Free what dies here (outputs live to the end).
      for (size_t b = 0; b < vals.size(); ++b)
        if (last_use_[b] == static_cast<int>(si) && vals[b].owned) {
          parts_->runtime->free(vals[b].ptr);
          vals[b] = DeviceValue{};
        }
    }
    return parts_->runtime->synchronize();
  }

  Status plan_arena(const std::vector<int64_t>& syms) {
    plan_ = nullptr;
    if (planner_.requests().empty()) return Status::ok();
    auto plan = planner_.plan_for(syms);
    if (!plan) return Status::ok();  // everything gets its own allocation
    int64_t need = std::max<int64_t>((*plan)->arena_bytes, 256);
    if (need > arena_bytes_) {
      if (arena_) parts_->runtime->free(arena_);
      arena_ = nullptr;
      arena_bytes_ = 0;
      FERRITE_ASSIGN_OR_RETURN(arena_, parts_->runtime->allocate(static_cast<size_t>(need), align()));
      arena_bytes_ = need;
    }
    plan_ = *plan;
    MemoryStats m;
    m.planned_peak_bytes = plan_->arena_bytes;
    m.intermediate_bytes = plan_->total_bytes;
    m.live_peak_bytes = plan_->live_peak_bytes;
    m.planned_buffers = plan_->buffers;
    m.in_place = plan_->in_place;
    m.arena_capacity_bytes = arena_bytes_;
    memory_ = m;
    return Status::ok();
  }

  Status run_kernel(size_t step, const Kernel& k, void* fn, const SymBindings& bind,
                    const std::vector<int64_t>& syms, std::vector<DeviceValue>& vals) {
    FERRITE_ASSIGN_OR_RETURN(auto dims, eval_dims(k.shape, bind));
    FERRITE_ASSIGN_OR_RETURN(auto out_dims,
                             eval_dims(lg_.buffers[k.output_buffer].shape.dims(), bind));
    FERRITE_ASSIGN_OR_RETURN(vals[k.output_buffer], place(k.output_buffer, k.out_dtype, out_dims));
    int64_t rows = 1, row_len = 1;
    for (size_t d = 0; d < dims.size(); ++d) (d < k.outer_rank() ? rows : row_len) *= dims[d];
    if (vals[k.output_buffer].bytes() == 0 || rows == 0) return Status::ok();
    for (const auto& x : k.extra_outputs) {
      FERRITE_ASSIGN_OR_RETURN(auto xdims, eval_dims(lg_.buffers[x.buffer].shape.dims(), bind));
      FERRITE_ASSIGN_OR_RETURN(vals[x.buffer], place(x.buffer, x.dtype, xdims));
    }
    std::vector<void*> bufs;
    for (int b : k.input_buffers) bufs.push_back(vals[b].ptr);
    bufs.push_back(vals[k.output_buffer].ptr);
    for (const auto& x : k.extra_outputs) bufs.push_back(vals[x.buffer].ptr);
    auto timed = [&](const LaunchConfig& c) -> Expected<double> {
      auto t0 = std::chrono::steady_clock::now();
      FERRITE_RETURN_IF_ERROR(launch_(fn, c, bufs, syms));
      FERRITE_RETURN_IF_ERROR(parts_->runtime->synchronize());
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    FERRITE_ASSIGN_OR_RETURN(LaunchConfig launch,
                             launches_.choose(step, k, rows, row_len, /*tunable=*/true, timed));
    const LaunchLimits& lim = parts_->properties.launch;
    // The heuristics promise legal launches; a plugin's own heuristics might not, and the
    // grid-dialect kernels cover all rows for any grid, so a grid is adjusted, never trusted.
    if (!lim.grid_allowed(launch.grid)) launch.grid = lim.clamp_grid(launch.grid);
    if (!lim.block_allowed(launch.block))
      return err(parts_->properties.name, ": no legal block size for kernel ", k.name);
    if (log_enabled("launch"))
      std::fprintf(stderr, "[launch] %s %s rows=%lld grid=%lld block=%lld\n",
                   parts_->properties.name.c_str(), k.name.c_str(), static_cast<long long>(rows),
                   static_cast<long long>(launch.grid), static_cast<long long>(launch.block));
    Status s = launch_(fn, launch, bufs, syms);
    if (!s.is_ok()) return err("kernel ", k.name, " (", join_nodes(k), "): ", s.message());
    return Status::ok();
  }

  static std::string join_nodes(const Kernel& k) {
    std::string out;
    for (const auto& n : k.source_nodes) out += (out.empty() ? "" : ", ") + n;
    return out.empty() ? "copy" : out;
  }

  // A step without a device kernel: its op-table reference kernel on host copies.
  Status run_on_host(const Step& s, const SymBindings& bind, std::vector<DeviceValue>& vals) {
    std::vector<Tensor> host(s.inputs.size());
    std::vector<const Tensor*> ins;
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      if (s.inputs[i] < 0) {
        ins.push_back(nullptr);
        continue;
      }
      const DeviceValue& v = vals[s.inputs[i]];
      const Buffer& buf = lg_.buffers[s.inputs[i]];
      if (buf.kind == Buffer::Kind::kConstant) {  // the host copy is at hand: no download
        const Tensor& c = *buf.value->constant;
        if (s.input_dims[i]) {
          FERRITE_ASSIGN_OR_RETURN(auto dims, eval_dims(*s.input_dims[i], bind));
          if (dims == c.dims()) {
            host[i] = c;
          } else {
            auto view = c.view(std::move(dims));
            if (!view)
              return view.status().with_context(str_cat(s.node->describe(), ": input ", i));
            host[i] = std::move(view).value();
          }
        } else {
          host[i] = c;
        }
      } else if (s.input_dims[i]) {
        FERRITE_ASSIGN_OR_RETURN(auto dims, eval_dims(*s.input_dims[i], bind));
        FERRITE_ASSIGN_OR_RETURN(host[i], download(v, &dims));
      } else {
        FERRITE_ASSIGN_OR_RETURN(host[i], download(v));
      }
      ins.push_back(&host[i]);
    }
    std::vector<Tensor> outs(s.node->outputs.size());
    KernelContext ctx(*s.node, std::move(ins), outs);
    FERRITE_RETURN_IF_ERROR(s.node->schema->kernel(ctx));
    ++host_fallbacks_;
    if (log_enabled("fallback"))
      std::fprintf(stderr, "[fallback] %s: %s (%s) ran on the host\n",
                   parts_->properties.name.c_str(), s.node->name.c_str(), s.node->op_type.c_str());
    for (size_t i = 0; i < s.outputs.size(); ++i) {
      int b = s.outputs[i];
      if (b < 0) continue;
      FERRITE_ASSIGN_OR_RETURN(vals[b], place(b, outs[i].dtype(), outs[i].dims()));
      FERRITE_RETURN_IF_ERROR(
          parts_->runtime->copy_to_device(vals[b].ptr, outs[i].raw(), outs[i].nbytes()));
    }
    return Status::ok();
  }

  const Graph& graph_;
  LoweredGraph lg_;
  std::unique_ptr<LoadedModule> module_;
  std::shared_ptr<BackendParts> parts_;
  LaunchFn launch_;
  LaunchChooser launches_;
  std::vector<void*> fns_;
  std::vector<int> last_use_;
  std::vector<int> request_of_buffer_, buffer_of_request_;
  SymbolicMemoryPlanner planner_;
  const MemoryPlan* plan_ = nullptr;
  void* arena_ = nullptr;
  int64_t arena_bytes_ = 0;
  std::map<int, DeviceValue> constants_;
  std::optional<MemoryStats> memory_;
  int64_t host_fallbacks_ = 0;
  mutable std::mutex mu_;
};

}  // namespace

Expected<std::unique_ptr<PreparedModel>> prepare_launch_model(
    const Graph& graph, std::shared_ptr<BackendParts> parts, LaunchFn launch,
    const RunOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  const std::string& name = parts->properties.name;
  if (!parts->compiler)
    return unsupported(name, ": the device has no compiler (its plugin provides no "
                             "module_compile), so it cannot run generated kernels");
  LoweringOptions lower_opts;
  lower_opts.horizontal_fusion = true;  // the grid dialect stores extra outputs
  lower_opts.generate_matmul = true;     // the SDK has no library GEMM: generate it
  FERRITE_ASSIGN_OR_RETURN(LoweredGraph lg, lower_graph(graph, lower_opts));
  FERRITE_ASSIGN_OR_RETURN(std::string source, parts->dialect->generate(lg, parts->properties));
  if (log_enabled("fusion"))
    std::fprintf(stderr,
                 "[fusion] %zu nodes -> %d generated kernels (%d with reductions; %d nodes fused) "
                 "+ %d host steps\n",
                 graph.nodes().size(), lg.kernels, lg.row_kernels, lg.fused_nodes,
                 lg.library_steps);
  FERRITE_ASSIGN_OR_RETURN(CompiledModule compiled, parts->compiler->compile(source, "kernels"));
  auto model = std::make_unique<LaunchModel>(graph, std::move(lg), std::move(compiled.module),
                                             parts, std::move(launch), opts.autotune);
  FERRITE_RETURN_IF_ERROR(model->init());
  if (log_enabled("compile"))
    std::fprintf(stderr, "[compile] %s: %.3f s (device compiler %.3f s)\n", name.c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                 compiled.seconds);
  return std::unique_ptr<PreparedModel>(std::move(model));
}

}  // namespace ferrite
