// The `cpu` device: lowers the graph (fusing pointwise chains and views into generated C++
// kernels), compiles them once with the host C++ compiler, and runs the step list with a thread
// pool. Ops without a lowering yet run their op-table kernel on contiguous buffers. Shapes stay
// symbolic in the generated code, so one compile serves every input size.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_map>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/host_compiler.h"
#include "backends/cpu/thread_pool.h"
#include "lower/lowering.h"
#include "memory/in_place.h"
#include "memory/lowered_memory.h"
#include "ops/context.h"
#include "ops/op_schema.h"
#include "runtime/device.h"
#include "runtime/dump.h"
#include "tune/autotuner.h"

namespace ferrite {

namespace {

using KernelFnPtr = void (*)(void* const*, const int64_t*, int64_t, int64_t);

bool log_enabled(const char* topic) {
  const char* v = std::getenv("FERRITE_LOG");
  return v && (std::string(v).find(topic) != std::string::npos || std::string(v) == "all");
}

bool low_float(DType t) { return t == DType::kBF16 || t == DType::kF16; }

// bf16 / f16 values widened to f32 (exact).
Tensor widen(const Tensor& t) {
  Tensor r = Tensor::create_uninitialized(DType::kF32, t.dims()).value();
  float* d = r.data<float>();
  if (t.dtype() == DType::kBF16) {
    const BFloat16* x = t.data<BFloat16>();
    for (int64_t i = 0; i < t.numel(); ++i) d[i] = static_cast<float>(x[i]);
  } else {
    const Half* x = t.data<Half>();
    for (int64_t i = 0; i < t.numel(); ++i) d[i] = static_cast<float>(x[i]);
  }
  return r;
}

// f32 `from` rounded into bf16 / f16 `to` (same element count).
void narrow(const Tensor& from, Tensor& to) {
  const float* x = from.data<float>();
  if (to.dtype() == DType::kBF16) {
    BFloat16* d = to.data<BFloat16>();
    for (int64_t i = 0; i < from.numel(); ++i) d[i] = BFloat16(x[i]);
  } else {
    Half* d = to.data<Half>();
    for (int64_t i = 0; i < from.numel(); ++i) d[i] = Half(x[i]);
  }
}

// A bf16 / f16 library node seen as its f32 twin, so that the cpu kernels that take f32 (oneDNN
// GEMM and convolution, attention, pooling) run it: inputs widen exactly, the f32 kernel runs,
// outputs round once to the node's dtype. That is what the op table's kernels compute (float
// arithmetic, one rounding per output), without their scalar single-threaded loops.
struct WideNode {
  Node node;
  std::vector<std::unique_ptr<Value>> values;
  const CpuKernel* kernel = nullptr;
};

class CpuModel : public PreparedModel {
 public:
  CpuModel(const Graph& g, LoweredGraph lg, std::unique_ptr<LoadedModule> module, int threads,
           std::shared_ptr<const BackendParts> parts, bool autotune)
      : graph_(g), lg_(std::move(lg)), module_(std::move(module)), parts_(std::move(parts)),
        launches_(parts_->properties, *parts_->heuristics, autotune), pool_(threads) {
    for (const Step& s : lg_.steps)
      fns_.push_back(s.kind == Step::Kind::kKernel
                         ? reinterpret_cast<KernelFnPtr>(module_->symbol(s.kernel.name))
                         : nullptr);
    // Last step reading each buffer, so intermediates are released early.
    last_use_.assign(lg_.buffers.size(), -1);
    for (size_t i = 0; i < lg_.steps.size(); ++i) {
      const Step& s = lg_.steps[i];
      if (s.kind == Step::Kind::kKernel)
        for (int b : s.kernel.input_buffers) last_use_[b] = static_cast<int>(i);
      else
        for (int b : s.inputs)
          if (b >= 0) last_use_[b] = static_cast<int>(i);
    }
    for (int b : lg_.outputs) last_use_[b] = INT32_MAX;
    memory_ = std::make_unique<LoweredMemory>(lg_, last_use_);
  }

  bool ready() const {
    for (size_t i = 0; i < fns_.size(); ++i)
      if (lg_.steps[i].kind == Step::Kind::kKernel && !fns_[i]) return false;
    return true;
  }

  // `ferrite run --dump`: see runtime/dump.h.
  Status start_dump(const std::filesystem::path& dir, const std::string& source) {
    FERRITE_ASSIGN_OR_RETURN(dump_, CompileDump::write(dir, graph_, lg_, source, *memory_));
    return Status::ok();
  }

  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) override {
    std::lock_guard<std::mutex> lock(run_mutex_);  // one arena per model: runs take turns
    // Bind shape symbols from the inputs (the session already checked their consistency).
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
      if (it == bind.end()) return err("cpu: shape symbol '", name, "' is not bound by any input");
      syms.push_back(it->second);
    }
    memory_->begin_run(syms);
    if (dump_) dump_->on_run(*memory_, syms);
    std::vector<Tensor> bufs(lg_.buffers.size());
    for (size_t i = 0; i < lg_.inputs.size(); ++i) bufs[lg_.inputs[i]] = inputs[i];
    for (size_t b = 0; b < lg_.buffers.size(); ++b)
      if (lg_.buffers[b].kind == Buffer::Kind::kConstant) bufs[b] = *lg_.buffers[b].value->constant;

    launches_.begin_run(lg_.kernels);
    struct EndRun {
      LaunchChooser& l;
      ~EndRun() { l.end_run(); }
    } end_run{launches_};
    for (size_t si = 0; si < lg_.steps.size(); ++si) {
      const Step& s = lg_.steps[si];
      if (s.kind == Step::Kind::kKernel) {
        FERRITE_RETURN_IF_ERROR(run_kernel(si, s.kernel, fns_[si], bind, syms, bufs));
      } else {
        FERRITE_RETURN_IF_ERROR(run_library_guarded(s, bind, bufs));
      }
      release(si, bufs);
    }
    std::vector<Tensor> out;
    for (int b : lg_.outputs) out.push_back(bufs[b]);
    return out;
  }

 private:
  static Expected<std::vector<int64_t>> eval_dims(const std::vector<Dim>& dims,
                                                  const SymBindings& bind) {
    std::vector<int64_t> out;
    for (const Dim& d : dims) {
      auto v = d.expr().evaluate(bind);
      if (!v || *v < 0) return err("cpu: cannot evaluate dim ", d.to_string());
      out.push_back(*v);
    }
    return out;
  }

  // Runs a generated kernel over its rows in parallel: all dims but the last for a pointwise
  // kernel, the dims before the reduced ones for a row kernel (a row is never split).
  Status run_kernel(size_t step, const Kernel& k, KernelFnPtr fn, const SymBindings& bind,
                    const std::vector<int64_t>& syms, std::vector<Tensor>& bufs) {
    FERRITE_ASSIGN_OR_RETURN(auto dims, eval_dims(k.shape, bind));
    FERRITE_ASSIGN_OR_RETURN(auto out_dims,
                             eval_dims(lg_.buffers[k.output_buffer].shape.dims(), bind));
    auto allocated = memory_->allocate(k.output_buffer, k.out_dtype, out_dims, /*zero=*/false);
    if (!allocated)
      return allocated.status().with_context(
          str_cat("value '", lg_.buffers[k.output_buffer].name, "'"));
    Tensor out = std::move(allocated).value();
    std::vector<void*> ptrs;
    for (int b : k.input_buffers) ptrs.push_back(const_cast<void*>(bufs[b].raw()));
    ptrs.push_back(out.raw());
    // Horizontally fused outputs: same iteration space, their own buffers.
    std::vector<Tensor> extras;
    for (const auto& x : k.extra_outputs) {
      FERRITE_ASSIGN_OR_RETURN(auto xdims, eval_dims(lg_.buffers[x.buffer].shape.dims(), bind));
      FERRITE_ASSIGN_OR_RETURN(Tensor t, memory_->allocate(x.buffer, x.dtype, xdims, false));
      ptrs.push_back(t.raw());
      extras.push_back(std::move(t));
    }
    int64_t rows = 1, row_len = 1;
    for (size_t d = 0; d < dims.size(); ++d) (d < k.outer_rank() ? rows : row_len) *= dims[d];
    // Per-row kernels store rows values; the others rows * row_len.
    if (out.numel() > 0 && rows > 0) {
      auto launch_with = [&](const LaunchConfig& c) {
        pool_.parallel_for(rows, c.rows_per_block,
                           [&](int64_t b, int64_t e) { fn(ptrs.data(), syms.data(), b, e); });
      };
      // A kernel running in place over its input cannot be repeated for timing.
      bool in_place = k.in_place_slot >= 0 && ptrs[k.in_place_slot] == ptrs.back();
      FERRITE_ASSIGN_OR_RETURN(
          LaunchConfig launch,
          launches_.choose(step, k, rows, row_len, !in_place,
                           [&](const LaunchConfig& c) -> Expected<double> {
                             auto t0 = std::chrono::steady_clock::now();
                             launch_with(c);
                             return std::chrono::duration<double>(
                                        std::chrono::steady_clock::now() - t0)
                                 .count();
                           }));
      launch_with(launch);
    }
    bufs[k.output_buffer] = std::move(out);
    for (size_t x = 0; x < extras.size(); ++x) bufs[k.extra_outputs[x].buffer] = std::move(extras[x]);
    return Status::ok();
  }

  // Library kernels allocate (std::vector, oneDNN scratch) and call oneDNN, which reports
  // failures by throwing (the thread pool carries a worker's exception back here): errors of
  // the node, never a terminated process.
  Status run_library_guarded(const Step& s, const SymBindings& bind, std::vector<Tensor>& bufs) {
    try {
      return run_library(s, bind, bufs);
    } catch (const std::bad_alloc&) {
      return err(s.node->describe(), ": out of memory");
    } catch (const std::exception& e) {
      return err(s.node->describe(), ": library kernel failed: ", e.what());
    }
  }

  Status run_library(const Step& s, const SymBindings& bind, std::vector<Tensor>& bufs) {
    std::vector<Tensor> views(s.inputs.size());
    std::vector<const Tensor*> ins;
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      if (s.inputs[i] < 0) {
        ins.push_back(nullptr);
        continue;
      }
      const Tensor& t = bufs[s.inputs[i]];
      if (s.input_dims[i]) {
        FERRITE_ASSIGN_OR_RETURN(auto dims, eval_dims(*s.input_dims[i], bind));
        if (dims == t.dims()) {
          views[i] = t;
        } else {
          auto v = t.view(std::move(dims));
          if (!v) return v.status().with_context(str_cat(s.node->describe(), ": input ", i));
          views[i] = std::move(v).value();
        }
      } else {
        views[i] = t;
      }
      ins.push_back(&views[i]);
    }
    std::vector<Tensor> outs(s.node->outputs.size());
    KernelContext ctx(*s.node, std::move(ins), outs);
    ctx.set_output_allocator(memory_->output_allocator(s.outputs));
    if (const CpuKernel* k = CpuKernelRegistry::global().find(*s.node)) {
      FERRITE_RETURN_IF_ERROR(k->run(ctx, pool_));
    } else if (const WideNode* w = widened(*s.node)) {
      const size_t n_in = s.inputs.size();  // `ins` moved into ctx
      std::vector<Tensor> wide_in(n_in);
      std::vector<const Tensor*> wins(n_in, nullptr);
      for (size_t i = 0; i < n_in; ++i) {
        if (!ctx.has_input(i)) continue;
        wins[i] = &ctx.input(i);
        if (!low_float(wins[i]->dtype())) continue;
        // Constants (weights) are widened once: the kernels then see the same f32 tensor every
        // run and keep their prepacked copies of it.
        const Value* v = s.node->input(i);
        const Value* tw = w->node.input(i);
        if (v && v->constant && tw->constant && v->constant->raw() == wins[i]->raw() &&
            v->constant->dims() == wins[i]->dims()) {
          wins[i] = &*tw->constant;
          continue;
        }
        wide_in[i] = widen(*wins[i]);
        wins[i] = &wide_in[i];
      }
      std::vector<Tensor> wouts(outs.size());
      KernelContext wctx(w->node, std::move(wins), wouts);
      FERRITE_RETURN_IF_ERROR(w->kernel->run(wctx, pool_));
      for (size_t i = 0; i < outs.size(); ++i) {
        const Value* v = s.node->output(i);
        if (!v || !wouts[i].defined()) continue;
        if (wouts[i].dtype() == v->type.dtype) {
          outs[i] = std::move(wouts[i]);
          continue;
        }
        FERRITE_ASSIGN_OR_RETURN(Tensor * o,
                                 ctx.allocate_output_uninitialized(i, v->type.dtype, wouts[i].dims()));
        narrow(wouts[i], *o);
      }
    } else {
      FERRITE_RETURN_IF_ERROR(s.node->schema->kernel(ctx));
    }
    for (size_t i = 0; i < s.outputs.size(); ++i) {
      if (s.outputs[i] < 0) continue;
      FERRITE_ASSIGN_OR_RETURN(bufs[s.outputs[i]],
                               memory_->adopt_output(s.outputs[i], std::move(outs[i])));
    }
    return Status::ok();
  }

  ModelStats stats() const override {
    std::lock_guard<std::mutex> lock(run_mutex_);
    ModelStats st;
    st.memory = memory_->stats();
    st.tuning = launches_.stats();
    return st;
  }

  void release(size_t step, std::vector<Tensor>& bufs) {
    for (size_t b = 0; b < bufs.size(); ++b)
      if (last_use_[b] == static_cast<int>(step) && lg_.buffers[b].kind != Buffer::Kind::kOutput)
        bufs[b] = Tensor();
  }

  const Graph& graph_;
  LoweredGraph lg_;
  std::unique_ptr<LoadedModule> module_;
  std::shared_ptr<const BackendParts> parts_;
  LaunchChooser launches_;
  std::vector<KernelFnPtr> fns_;
  std::vector<int> last_use_;
  std::unique_ptr<LoweredMemory> memory_;  // arena for the intermediates
  std::unique_ptr<CompileDump> dump_;
  mutable std::mutex run_mutex_;
  ThreadPool pool_;

  // The f32 twin of a bf16 / f16 library node whose op has a cpu kernel, or null.
  const WideNode* widened(const Node& n) {
    std::lock_guard<std::mutex> lock(wide_mutex_);
    auto it = wide_.find(&n);
    if (it != wide_.end()) return it->second.get();
    auto w = std::make_unique<WideNode>();
    w->node = n;
    bool low = false;
    auto twin = [&](Value*& v) {
      if (!v || !low_float(v->type.dtype)) return;
      auto c = std::make_unique<Value>(*v);
      c->type.dtype = DType::kF32;
      if (c->constant) c->constant = widen(*c->constant);
      v = c.get();
      w->values.push_back(std::move(c));
      low = true;
    };
    for (Value*& v : w->node.inputs) twin(v);
    for (Value*& v : w->node.outputs) twin(v);
    w->kernel = low ? CpuKernelRegistry::global().find(w->node) : nullptr;
    if (!w->kernel) w.reset();
    return (wide_[&n] = std::move(w)).get();
  }
  std::mutex wide_mutex_;
  std::unordered_map<const Node*, std::unique_ptr<WideNode>> wide_;
};

class CpuDevice : public Device {
 public:
  CpuDevice() {
    auto parts = std::make_shared<BackendParts>(make_cpu_backend_parts());
    Status s = parts->finalize();
    FERRITE_CHECK(s.is_ok());  // the cpu parts are all built in
    parts_ = std::move(parts);
  }
  std::string name() const override { return "cpu"; }
  DeviceProperties properties() const override { return parts_->properties; }
  std::string description() const override {
    return "host CPU: fused kernels generated as C++, compiled with the system compiler";
  }
  std::vector<std::string> default_passes() const override { return {"default"}; }
  // bf16 / fp16: generated kernels convert on load and store; library steps without a low
  // precision implementation (oneDNN GEMM / conv take f32) run the op table's kernels.
  Status check_precision(Precision p) const override {
    if (p == Precision::kTF32)
      return unsupported("device 'cpu' does not run precision tf32 (a GPU tensor-core GEMM "
                         "mode); use f32, bf16 or fp16");
    return Status::ok();
  }
  Expected<std::unique_ptr<PreparedModel>> prepare(const Graph& graph,
                                                   const RunOptions& opts) override {
    auto t0 = std::chrono::steady_clock::now();
    LoweringOptions lower_opts;
    lower_opts.horizontal_fusion = true;
    lower_opts.low_precision_kernels = true;
    FERRITE_ASSIGN_OR_RETURN(LoweredGraph lg, lower_graph(graph, lower_opts));
    mark_in_place_candidates(lg);  // before codegen: in-place pairs are not __restrict
    FERRITE_ASSIGN_OR_RETURN(std::string source,
                             parts_->dialect->generate(lg, parts_->properties));
    if (log_enabled("fusion"))
      std::fprintf(stderr,
                   "[fusion] %zu nodes -> %d generated kernels (%d with reductions; %d nodes "
                   "fused; %d horizontal merges) + %d library calls\n",
                   graph.nodes().size(), lg.kernels, lg.row_kernels, lg.fused_nodes,
                   lg.horizontal_merges, lg.library_steps);
    if (const char* dump = std::getenv("FERRITE_DUMP_LOWERED")) {
      std::FILE* f = std::fopen(dump, "w");
      if (f) {
        std::fputs(print_lowered(lg).c_str(), f);
        std::fputs("\n", f);
        std::fputs(source.c_str(), f);
        std::fclose(f);
      }
    }
    FERRITE_ASSIGN_OR_RETURN(CompiledModule compiled, parts_->compiler->compile(source, "kernels"));
    int threads = opts.threads > 0 ? opts.threads
                                   : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    auto model = std::make_unique<CpuModel>(graph, std::move(lg), std::move(compiled.module),
                                            threads, parts_, opts.autotune);
    if (!model->ready()) return err("cpu: a generated kernel is missing from the compiled module");
    if (opts.dump_dir) FERRITE_RETURN_IF_ERROR(model->start_dump(*opts.dump_dir, source));
    if (log_enabled("compile"))
      std::fprintf(stderr, "[compile] cpu: %.3f s (%s %.3f s)%s%s\n",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                   compiled.cache_hit ? "compile cache hit, load" : "C++ compile", compiled.seconds,
                   compiled.cache_note.empty() ? "" : "; cache: ", compiled.cache_note.c_str());
    return std::unique_ptr<PreparedModel>(std::move(model));
  }

 private:
  std::shared_ptr<BackendParts> parts_;
};

}  // namespace

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

}  // namespace ferrite
