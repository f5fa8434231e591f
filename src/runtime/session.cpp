#include "runtime/session.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>

#include "frontend/onnx/tensor_proto.h"
#include "ops/context.h"
#include "passes/pass.h"
#include "support/result_dir.h"

namespace ferrite {

namespace {

bool recompile_log_enabled() {
  const char* v = std::getenv("FERRITE_LOG");
  return v && (std::string(v).find("recompile") != std::string::npos || std::string(v) == "all");
}

// A symbol name for a dim made dynamic: "<input>_d<dim>", made an identifier and unique.
std::string fresh_symbol(const std::string& input, int dim, const std::set<std::string>& taken) {
  std::string base;
  for (char c : input) base += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (base.empty() || std::isdigit(static_cast<unsigned char>(base[0]))) base = "in_" + base;
  base += "_d" + std::to_string(dim);
  std::string name = base;
  for (int k = 2; taken.count(name); ++k) name = base + "_" + std::to_string(k);
  return name;
}

}  // namespace

Expected<std::unique_ptr<Session>> Session::load(const std::filesystem::path& model,
                                                 const std::string& device,
                                                 const RunOptions& opts) {
  FERRITE_ASSIGN_OR_RETURN(auto graph, import_onnx_file(model));
  auto s = from_graph(std::move(graph), device, opts);
  if (s) (*s)->set_label(model.filename().string());
  return s;
}

Expected<std::unique_ptr<Session>> Session::from_graph(std::unique_ptr<Graph> graph,
                                                       const std::string& device,
                                                       const RunOptions& opts) {
  if (!graph) return err("no graph to run");
  // A graph imported with allow_unknown_ops, or built by hand, may not be runnable: refuse it
  // here rather than let a device meet a node without a kernel.
  for (const auto& node : graph->nodes())
    if (!node->schema)
      return unsupported(node->describe(), ": op '", node->op_type, "' is not supported");
  FERRITE_RETURN_IF_ERROR(verify_graph(*graph));
  auto s = std::unique_ptr<Session>(new Session());
  s->graph_ = std::move(graph);
  s->opts_ = opts;
  s->label_ = s->graph_->name.empty() ? "model" : s->graph_->name;
  s->device_chosen_ = device.empty();
  FERRITE_ASSIGN_OR_RETURN(
      s->device_, DeviceRegistry::global().create(device.empty() ? default_device() : device));
  FERRITE_RETURN_IF_ERROR(s->device_->check_precision(opts.precision));
  FERRITE_RETURN_IF_ERROR(s->init());
  return s;
}

Status Session::init() {
  max_contexts_ = opts_.contexts;
  if (max_contexts_ <= 0) max_contexts_ = std::max(1, device_->default_contexts());
  declared_ = GuardSet::for_inputs(*graph_);
  const auto& in = graph_->inputs();
  for (size_t i = 0; i < in.size(); ++i) {
    const Shape& shape = in[i]->type.shape;
    // Sequences and optionals have no dims of their own to specialise.
    if (!shape.rank_known() || !in[i]->type.is_tensor()) continue;
    for (size_t d = 0; d < shape.rank(); ++d)
      if (!shape[d].is_known()) open_dims_.push_back({static_cast<int>(i), static_cast<int>(d)});
  }
  in_place_ = open_dims_.empty();
  // Nothing to specialise: compile now, so that errors show at load time as before.
  if (in_place_) {
    FERRITE_ASSIGN_OR_RETURN(auto v, compile({}));
    variants_.push_back(v);
    last_ = v;
  }
  return Status::ok();
}

Expected<std::shared_ptr<Session::Variant>> Session::compile(const std::vector<Tensor>& inputs) {
  auto v = std::make_shared<Variant>();
  Graph* g = graph_.get();
  if (!in_place_) {
    v->owned = copy_graph(*graph_);
    g = v->owned.get();
  }
  v->graph = g;
  v->guards = declared_;
  for (const OpenDim& od : open_dims_) {
    Dim& d = g->inputs()[od.input]->type.shape.dims()[od.dim];
    if (od.mode == DimMode::kSpecialise) {
      int64_t size = inputs.at(od.input).dim(od.dim);
      d = Dim(size);
      v->guards.add_specialised(od.input, od.dim, size);
    } else {
      d = Dim::symbol(od.symbol);
      v->guards.add_symbol(od.input, od.dim, od.symbol);
    }
  }
  // Inference runs again (the input types may have changed) while the passes and the device
  // see the graph, recording what it assumes about the symbols.
  std::vector<ShapeAssumption> assumed;
  {
    ShapeAssumptionScope scope(&assumed);
    for (const auto& node : g->nodes()) {
      ShapeAssumptionScope::set_label(node->describe());
      FERRITE_RETURN_IF_ERROR(infer_node(*node));
    }
    FERRITE_RETURN_IF_ERROR(verify_graph(*g));
    ShapeAssumptionScope::set_label("a graph pass");
    std::vector<std::string> pipeline;
    if (opts_.passes) {
      pipeline = *opts_.passes;
      if (pipeline.size() == 1 && pipeline[0] == "default") pipeline = default_pipeline();
    } else {
      FERRITE_ASSIGN_OR_RETURN(pipeline, default_passes(*device_));
    }
    // After the fusion rewrites, so that their patterns match the float32 graph they were
    // written for (the fused ops then run in the low dtype like the rest), and before the passes
    // that decide by storage dtype (layout-channels-last{dtypes=bf16+f16}).
    DType low = precision_storage(opts_.precision);
    if (low != DType::kF32) {
      auto decides_by_dtype = [](const std::string& spec) {
        const PassInfo* p = PassRegistry::global().find(spec.substr(0, spec.find('{')));
        return p && p->after_precision;
      };
      pipeline.insert(std::find_if(pipeline.begin(), pipeline.end(), decides_by_dtype),
                      precision_pass_name(low));
    }
    if (!pipeline.empty()) FERRITE_RETURN_IF_ERROR(run_pipeline(*g, pipeline));
    ShapeAssumptionScope::set_label("");
    RunOptions opts = opts_;
    // Later compiles dump next to the first one instead of over it.
    if (opts.dump_dir && compiles_ > 0)
      opts.dump_dir = *opts.dump_dir / ("compile_" + std::to_string(compiles_ + 1));
    FERRITE_ASSIGN_OR_RETURN(v->prepared, device_->prepare(*g, opts));
    v->guards.add_assumptions(assumed);
    // Next to the device's dump: what this compile assumes about its inputs.
    if (opts.dump_dir && std::filesystem::is_directory(*opts.dump_dir))
      FERRITE_RETURN_IF_ERROR(
          write_file_atomic(*opts.dump_dir / "guards.txt", v->guards.to_string()));
  }
  ++compiles_;
  return v;
}

Expected<std::vector<Tensor>> Session::bind_inputs(const std::vector<NamedInput>& inputs,
                                                   std::vector<int>* given_at) const {
  const auto& decl = graph_->inputs();
  std::vector<Tensor> bound(decl.size());
  std::vector<bool> have(decl.size(), false);
  bool by_name = !inputs.empty();
  for (const auto& in : inputs) {
    bool found = false;
    for (const Value* v : decl) found = found || v->name == in.name;
    by_name = by_name && found;
  }
  if (!by_name && inputs.size() > decl.size())
    return err("model has ", decl.size(), " inputs, but ", inputs.size(), " were given");
  for (size_t k = 0; k < inputs.size(); ++k) {
    size_t slot = k;
    if (by_name) {
      for (size_t i = 0; i < decl.size(); ++i)
        if (decl[i]->name == inputs[k].name) slot = i;
    }
    if (have[slot]) return err("input '", decl[slot]->name, "' is given twice");
    bound[slot] = inputs[k].tensor;
    have[slot] = true;
  }
  if (given_at) {
    given_at->assign(decl.size(), -1);
    for (size_t k = 0; k < inputs.size(); ++k) {
      size_t slot = k;
      if (by_name)
        for (size_t i = 0; i < decl.size(); ++i)
          if (decl[i]->name == inputs[k].name) slot = i;
      (*given_at)[slot] = static_cast<int>(k);
    }
  }
  for (size_t i = 0; i < decl.size(); ++i) {
    const Value* v = decl[i];
    if (!have[i]) {
      if (v->constant) {
        bound[i] = *v->constant;
        continue;
      }
      return err("missing input '", v->name, "' (", v->type.to_string(), ")");
    }
    const Tensor& t = bound[i];
    if (!t.defined()) return err("input '", v->name, "' is an empty (undefined) tensor");
    if (t.kind() != v->type.kind)
      return err("input '", v->name, "' is ", t.type_string(), " but the model declares ",
                 v->type.to_string());
    FERRITE_RETURN_IF_ERROR(check_dims(str_cat("input '", v->name, "'"), t.dims()));
  }
  // dtypes, ranks, dims and symbols are the guards' business (run()).
  return bound;
}

void Session::log(const std::string& line) const {
  if (log_) {
    log_(line);
  } else if (recompile_log_enabled()) {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

Expected<std::vector<Tensor>> Session::run(const std::vector<NamedInput>& inputs, RunInfo* info) {
  FERRITE_ASSIGN_OR_RETURN(auto bound, bind_inputs(inputs));
  bool compiled = false;
  FERRITE_ASSIGN_OR_RETURN(auto v, select(bound, &compiled));
  FERRITE_ASSIGN_OR_RETURN(Lease lease, checkout(v));
  auto out = lease.model().run(bound);
  if (info) *info = RunInfo{compiled, lease.index(), lease.model().stats()};
  return out;
}

Session::Lease::Lease(std::shared_ptr<Variant> v, int index, PreparedModel* model)
    : v_(std::move(v)), index_(index), model_(model) {}

Session::Lease::~Lease() {
  if (!v_) return;  // moved from
  {
    std::lock_guard<std::mutex> lock(v_->pool_mutex);
    v_->idle.push_back(index_);
  }
  v_->pool_cv.notify_one();
}

// An idle context of `v`, a new one while the pool is below max_contexts_, else the first one
// another run gives back. New contexts are prepared outside every lock: runs on the others go on.
Expected<Session::Lease> Session::checkout(const std::shared_ptr<Variant>& v) {
  std::unique_lock<std::mutex> lock(v->pool_mutex);
  for (;;) {
    if (!v->idle.empty()) {
      int k = v->idle.back();
      v->idle.pop_back();
      return Lease(v, k, k == 0 ? v->prepared.get() : v->extra[k - 1].get());
    }
    if (v->created < max_contexts_) break;
    v->pool_cv.wait(lock);
  }
  ++v->created;
  lock.unlock();
  RunOptions opts = opts_;
  opts.dump_dir.reset();  // context 0 dumped and traces this variant
  opts.trace.reset();
  // Weights in device memory are shared with context 0 (it outlives the others: Variant).
  for (auto& [host, mirror] : v->prepared->device_constants())
    opts.constant_mirrors.emplace(host, mirror);
  auto prepared = device_->prepare(*v->graph, opts);
  lock.lock();
  if (!prepared) {
    --v->created;
    v->pool_cv.notify_one();  // a waiter may try in its place
    return prepared.status();
  }
  v->extra.push_back(std::move(prepared).value());
  return Lease(v, static_cast<int>(v->extra.size()), v->extra.back().get());
}

Status Session::run_device(const std::vector<NamedInput>& inputs, DeviceRun run, RunInfo* info) {
  std::vector<int> given_at;
  FERRITE_ASSIGN_OR_RETURN(auto bound, bind_inputs(inputs, &given_at));
  if (run.input_dev.size() != inputs.size())
    return err("run_device: ", run.input_dev.size(), " device addresses for ", inputs.size(),
               " inputs");
  std::vector<const void*> dev(bound.size(), nullptr);  // graph order; null: a host value
  for (size_t i = 0; i < bound.size(); ++i)
    if (given_at[i] >= 0) dev[i] = run.input_dev[given_at[i]];
  run.input_dev = std::move(dev);
  bool compiled = false;
  FERRITE_ASSIGN_OR_RETURN(auto v, select(bound, &compiled));
  FERRITE_ASSIGN_OR_RETURN(Lease lease, checkout(v));
  Status s = lease.model().run_device(bound, run);
  if (info) *info = RunInfo{compiled, lease.index(), lease.model().stats()};
  return s;
}

// The compiled variant whose guards accept `bound`, compiling one when none does.
Expected<std::shared_ptr<Session::Variant>> Session::select(const std::vector<Tensor>& bound,
                                                            bool* compiled_now) {
  std::shared_ptr<Variant> v;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::optional<GuardFailure> newest;
    for (size_t k = 0; k < variants_.size(); ++k) {
      auto f = variants_[k]->guards.check(bound);
      if (!f) {
        v = variants_[k];
        std::rotate(variants_.begin(), variants_.begin() + static_cast<long>(k),
                    variants_.begin() + static_cast<long>(k) + 1);
        break;
      }
      if (k == 0) newest = f;
    }
    if (!v) {
      if (newest && newest->action == GuardFailure::Action::kError) return err(newest->message);
      if (auto f = declared_.check(bound)) return err(f->message);
      std::string why;
      if (newest) {
        // Every specialised dim whose size changed becomes dynamic for good.
        const GuardSet& gs = variants_.front()->guards;
        std::set<std::string> taken;
        for (const Value* in : graph_->inputs())
          if (in->type.shape.rank_known())
            for (const Dim& d : in->type.shape.dims())
              if (d.is_known()) {
                std::vector<std::string> names;
                d.expr().collect_symbols(names);
                taken.insert(names.begin(), names.end());
              }
        for (const OpenDim& od : open_dims_)
          if (od.mode == DimMode::kDynamic) taken.insert(od.symbol);
        std::string dynamic;
        for (const Guard& g : gs.guards()) {
          if (g.kind != Guard::Kind::kSpecialised || bound[g.input].dim(g.dim) == g.value) continue;
          for (OpenDim& od : open_dims_) {
            if (od.input != g.input || od.dim != g.dim || od.mode == DimMode::kDynamic) continue;
            od.mode = DimMode::kDynamic;
            od.symbol = fresh_symbol(gs.input_names()[g.input], g.dim, taken);
            taken.insert(od.symbol);
            dynamic +=
                str_cat(dynamic.empty() ? "" : ", ", gs.input_names()[g.input], " dim ", g.dim);
          }
        }
        why = str_cat("guard failed: ", newest->message, "; compiling with ", dynamic, " dynamic");
      }
      auto compiled = compile(bound);
      if (!compiled) return compiled.status();
      v = std::move(compiled).value();
      if (compiled_now) *compiled_now = true;
      if (why.empty()) {
        std::string spec;
        for (const Guard& g : v->guards.guards())
          if (g.kind == Guard::Kind::kSpecialised)
            spec += str_cat(spec.empty() ? "" : ", ", v->guards.describe(g));
        why = "specialising " + spec;
      }
      log(str_cat("[recompile] ", label_, ": ", why, " (compile #", compiles_, ")"));
      variants_.insert(variants_.begin(), v);
      if (variants_.size() > kMaxVariants) variants_.pop_back();
      // The new variant may still refuse these inputs (an assumption they break).
      if (auto f = v->guards.check(bound)) return err(f->message);
    }
    last_ = v;
  }
  return v;
}

Expected<DeviceTiming> Session::time_resident(const std::vector<NamedInput>& inputs, int runs) {
  FERRITE_RETURN_IF_ERROR(run(inputs).status());
  FERRITE_ASSIGN_OR_RETURN(auto bound, bind_inputs(inputs));
  std::shared_ptr<Variant> v;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    v = last_;
  }
  if (!v || !v->prepared) return err("no compiled variant to time");
  FERRITE_ASSIGN_OR_RETURN(Lease lease, checkout(v));
  return lease.model().time_resident(bound, runs);
}

const Graph& Session::compiled_graph() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_ ? *last_->graph : *graph_;
}

std::string Session::guards() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_ ? last_->guards.to_string() : "";
}

ModelStats Session::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_ && last_->prepared ? last_->prepared->stats() : ModelStats{};
}

}  // namespace ferrite
