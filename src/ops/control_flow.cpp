// Control flow: If, Loop and Scan. Their bodies are subgraph attributes (ir/attribute.h) that
// read enclosing-scope values through captures bound to the node's trailing inputs. Inference
// types each body from the node's inputs and infers it (infer_subgraph); the kernels run the
// bodies through the reference interpreter (ops/interpreter.h) on the host, which is also how
// every compiling device runs these nodes (a library step over the op table's kernel).
#include <cstring>

#include "ops/context.h"
#include "ops/interpreter.h"
#include "ops/op_schema.h"

namespace ferrite {

namespace {

// ---- inference --------------------------------------------------------------------------------

// Whether a value of kind `a` may stand where `b` is expected: the same kind, or one an optional
// of the other. ONNX lets a loop-carried value enter as optional(X) and leave as X
// (test_loop16_seq_none), and If branches differ so; the kernels convert (conform_kind).
bool kinds_compatible(ValueKind a, ValueKind b) {
  return a == b || (is_optional_kind(a) && optional_element_kind(a) == b) ||
         (is_optional_kind(b) && optional_element_kind(b) == a);
}

// The kind of a value that is `a` on one path and `b` on another (compatible): the optional one.
ValueKind joined_kind(ValueKind a, ValueKind b) {
  return is_optional_kind(a) ? a : b;
}

// False when the type is known to hold more (or fewer) than one element.
bool may_be_single_element(const TensorType& t) {
  if (!t.shape.rank_known()) return true;
  for (const Dim& d : t.shape.dims())
    if (d.value() && *d.value() != 1) return false;
  return true;
}

Graph& subgraph_attr(const InferContext& ctx, const char* name) {
  return ctx.node().attrs.at(name).g();
}

// Types the body's inputs (`formals`) and captures (the node's captured inputs), then infers it.
Status infer_body(const InferContext& ctx, Graph& body, const char* attr,
                  const std::vector<TensorType>& formals) {
  const Node& node = ctx.node();
  if (body.inputs().size() != formals.size())
    return ctx.error("subgraph '", attr, "' has ", body.inputs().size(), " inputs, expected ",
                     formals.size());
  for (size_t i = 0; i < formals.size(); ++i) {
    Value* v = body.inputs()[i];
    if (v->type.dtype != DType::kUndefined && v->type.dtype != formals[i].dtype)
      return ctx.error("subgraph '", attr, "' input ", i, " ('", v->name, "') is declared ",
                       dtype_name(v->type.dtype), " but receives ", dtype_name(formals[i].dtype));
    v->type = formals[i];
  }
  size_t first = node.num_explicit_inputs();
  for (size_t i = 0; i < body.captures().size(); ++i)
    body.captures()[i]->type = node.inputs[first + i]->type;
  FERRITE_RETURN_IF_ERROR(
      infer_subgraph(body).with_context(str_cat(node.describe(), ": subgraph '", attr, "'")));
  for (size_t i = 0; i < body.outputs().size(); ++i)
    if (body.outputs()[i]->type.dtype == DType::kUndefined)
      return ctx.error("subgraph '", attr, "' output ", i, " ('", body.outputs()[i]->name,
                       "') has no type");
  return Status::ok();
}

// Infers a body whose outputs [first_out, first_out + carried.size()) feed its inputs
// [first_in, ...) on the next iteration. The carried types start as the initial values' and are
// widened (merge_types) until the body maps them to themselves; each round makes a dim unknown,
// so this ends.
Status infer_carried(const InferContext& ctx, Graph& body, const char* attr,
                     std::vector<TensorType> formals, size_t first_in, size_t first_out,
                     std::vector<TensorType>& carried) {
  for (;;) {
    for (size_t i = 0; i < carried.size(); ++i) formals[first_in + i] = carried[i];
    FERRITE_RETURN_IF_ERROR(infer_body(ctx, body, attr, formals));
    if (body.outputs().size() < first_out + carried.size())
      return ctx.error("subgraph '", attr, "' has ", body.outputs().size(),
                       " outputs, expected at least ", first_out + carried.size());
    bool changed = false;
    for (size_t i = 0; i < carried.size(); ++i) {
      const TensorType& out = body.outputs()[first_out + i]->type;
      if (out.dtype != carried[i].dtype || !kinds_compatible(out.kind, carried[i].kind))
        return ctx.error("loop-carried value ", i, " enters subgraph '", attr, "' as ",
                         carried[i].to_string(), " but leaves it as ", out.to_string());
      // The kind stays the one that enters (the body's input), an optional where either is.
      TensorType merged = merge_types(carried[i], out);
      merged.kind = joined_kind(carried[i].kind, out.kind);
      if (!(merged == carried[i])) carried[i] = std::move(merged), changed = true;
    }
    if (!changed) return Status::ok();
  }
}

// `dims` with `d` inserted at `axis` (an unknown rank stays unknown).
Shape insert_dim(const Shape& s, int64_t axis, const Dim& d) {
  if (!s.rank_known()) return Shape::unknown_rank();
  std::vector<Dim> dims = s.dims();
  dims.insert(dims.begin() + axis, d);
  return Shape(std::move(dims));
}

// Infers both branches. ONNX validates only the branch that runs, and exporters emit Ifs whose
// untaken branch is invalid for the given shapes (AffineGrid's expanded function splits a 3-d
// size 4 ways in its 2-d branch), so a branch that fails while the other infers is kept with
// its error (Graph::deferred_error) for the kernel to report if that branch ever runs.
Status infer_if(InferContext& ctx) {
  const Node& node = ctx.node();
  if (node.num_explicit_inputs() != 1)
    return ctx.error("expects 1 input (cond), got ", node.num_explicit_inputs());
  if (ctx.input_dtype(0) != DType::kBool || !ctx.input_type(0).is_tensor() ||
      !may_be_single_element(ctx.input_type(0)))
    return ctx.error("cond must be a bool tensor of one element, got ",
                     ctx.input_type(0).to_string());
  Graph& then_g = subgraph_attr(ctx, "then_branch");
  Graph& else_g = subgraph_attr(ctx, "else_branch");
  then_g.deferred_error.clear();
  else_g.deferred_error.clear();
  Status then_st = infer_body(ctx, then_g, "then_branch", {});
  Status else_st = infer_body(ctx, else_g, "else_branch", {});
  // A cond known at compile time (an exporter's rank or opset switch) picks the branch's types.
  const Tensor* known = ctx.input_constant(0);
  if (known && known->numel() != 1) known = nullptr;
  if (known) {
    bool cond = known->int_at(0) != 0;
    FERRITE_RETURN_IF_ERROR(cond ? then_st : else_st);
    if (!(cond ? else_st : then_st).is_ok())
      (cond ? else_g : then_g).deferred_error = (cond ? else_st : then_st).message();
  } else if (!then_st.is_ok() || !else_st.is_ok()) {
    if (!then_st.is_ok() && !else_st.is_ok()) return then_st;
    (then_st.is_ok() ? else_g : then_g).deferred_error =
        (then_st.is_ok() ? else_st : then_st).message();
  }
  const bool both = then_st.is_ok() && else_st.is_ok();
  const Graph& first = then_st.is_ok() ? then_g : else_g;
  if (both && then_g.outputs().size() != else_g.outputs().size())
    return ctx.error("then_branch has ", then_g.outputs().size(), " outputs but else_branch has ",
                     else_g.outputs().size());
  if (ctx.num_outputs() > first.outputs().size())
    return ctx.error("has ", ctx.num_outputs(), " outputs but its branches have ",
                     first.outputs().size());
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    const TensorType& a = then_g.outputs()[i]->type;
    const TensorType& b = else_g.outputs()[i]->type;
    if (!both) {
      ctx.set_output(i, first.outputs()[i]->type);
      continue;
    }
    if (a.dtype != b.dtype || !kinds_compatible(a.kind, b.kind)) {
      bool kinds = a.kind != b.kind;  // else only the dtypes differ
      return ctx.error("output ", i, " is ",
                       kinds ? a.to_string() : std::string(dtype_name(a.dtype)),
                       " in then_branch but ",
                       kinds ? b.to_string() : std::string(dtype_name(b.dtype)), " in else_branch");
    }
    TensorType t = known ? (known->int_at(0) ? a : b) : merge_types(a, b);
    if (!known) t.kind = joined_kind(a.kind, b.kind);
    ctx.set_output(i, std::move(t));
  }
  return Status::ok();
}

// Loop: inputs (M, cond, v_initial...), body (iteration_num, cond, v...) -> (cond, v..., scan...).
Status infer_loop(InferContext& ctx) {
  const Node& node = ctx.node();
  size_t nexp = node.num_explicit_inputs();
  if (nexp < 2) return ctx.error("expects at least 2 inputs (M, cond), got ", nexp);
  if (ctx.has_input(0) && (ctx.input_dtype(0) != DType::kI64 || !ctx.input_type(0).is_tensor() ||
                           !may_be_single_element(ctx.input_type(0))))
    return ctx.error("trip count M must be an int64 tensor of one element, got ",
                     ctx.input_type(0).to_string());
  if (ctx.has_input(1) && (ctx.input_dtype(1) != DType::kBool || !ctx.input_type(1).is_tensor() ||
                           !may_be_single_element(ctx.input_type(1))))
    return ctx.error("cond must be a bool tensor of one element, got ",
                     ctx.input_type(1).to_string());
  size_t n = nexp - 2;
  for (size_t i = 0; i < n; ++i)
    if (!ctx.has_input(2 + i)) return ctx.error("loop-carried input ", 2 + i, " is missing");
  Graph& body = subgraph_attr(ctx, "body");
  std::vector<TensorType> carried;
  for (size_t i = 0; i < n; ++i) carried.push_back(ctx.input_type(2 + i));
  std::vector<TensorType> formals(2 + n);
  formals[0] = {DType::kI64, Shape::scalar()};
  formals[1] = {DType::kBool, Shape::scalar()};
  FERRITE_RETURN_IF_ERROR(infer_carried(ctx, body, "body", formals, 2, 1, carried));
  const TensorType& cond_out = body.outputs()[0]->type;
  if (cond_out.dtype != DType::kBool || !may_be_single_element(cond_out))
    return ctx.error("subgraph 'body' output 0 (cond) must be a bool tensor of one element, got ",
                     cond_out.to_string());
  size_t k = body.outputs().size() - 1 - n;
  if (ctx.num_outputs() > n + k)
    return ctx.error("has ", ctx.num_outputs(), " outputs but its body yields ", n,
                     " loop-carried ", "and ", k, " scan outputs");
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    const TensorType& t = body.outputs()[1 + i]->type;
    if (i < n) {
      // What the body yields (an optional that enters may leave as its value: loop16_seq_none).
      TensorType out = carried[i];
      out.kind = t.kind;
      ctx.set_output(i, std::move(out));
    } else if (!t.is_tensor()) {
      return ctx.error("scan output ", i - n, " of subgraph 'body' is ", t.to_string(),
                       "; scan outputs must be tensors");
    } else {
      // The trip count is known only at run time.
      ctx.set_output(i, t.dtype, insert_dim(t.shape, 0, Dim::unknown()));
    }
  }
  return Status::ok();
}

struct ScanAttrs {
  size_t n = 0, m = 0;  // state variables, scan inputs
  std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;
};

// Reads and checks Scan's attributes against the node; axes are normalised by `in_ranks` (the
// scan inputs' ranks) and `out_ranks` (the body's scan outputs' ranks) where known (-1: not).
Expected<ScanAttrs> scan_attrs(const Node& node, size_t body_outputs) {
  ScanAttrs a;
  int64_t m = node.attr_int("num_scan_inputs", -1);
  size_t nexp = node.num_explicit_inputs();
  if (m < 1 || static_cast<size_t>(m) > nexp)
    return err(node.describe(), ": num_scan_inputs is ", m, " but the node has ", nexp, " inputs");
  a.m = static_cast<size_t>(m);
  a.n = nexp - a.m;
  if (body_outputs < a.n)
    return err(node.describe(), ": subgraph 'body' has ", body_outputs, " outputs, fewer than its ",
               a.n, " state variables");
  size_t k = body_outputs - a.n;
  auto read = [&](const char* name, size_t count, std::vector<int64_t>& out) -> Status {
    out = node.attr_ints(name, std::vector<int64_t>(count, 0));
    if (out.size() != count)
      return err(node.describe(), ": attribute '", name, "' has ", out.size(), " values, expected ",
                 count);
    return Status::ok();
  };
  FERRITE_RETURN_IF_ERROR(read("scan_input_axes", a.m, a.in_axes));
  FERRITE_RETURN_IF_ERROR(read("scan_input_directions", a.m, a.in_dirs));
  FERRITE_RETURN_IF_ERROR(read("scan_output_axes", k, a.out_axes));
  FERRITE_RETURN_IF_ERROR(read("scan_output_directions", k, a.out_dirs));
  for (const auto* dirs : {&a.in_dirs, &a.out_dirs})
    for (int64_t d : *dirs)
      if (d != 0 && d != 1)
        return err(node.describe(), ": scan direction ", d, " is not 0 (forward) or 1 (reverse)");
  return a;
}

Status normalize_axis(const Node& node, int64_t& axis, int64_t rank, const char* what, size_t i) {
  if (axis < -rank || axis >= rank)
    return err(node.describe(), ": ", what, " ", i, " has axis ", axis, ", outside [", -rank, ", ",
               rank - 1, "]");
  if (axis < 0) axis += rank;
  return Status::ok();
}

Status infer_scan(InferContext& ctx) {
  const Node& node = ctx.node();
  Graph& body = subgraph_attr(ctx, "body");
  FERRITE_ASSIGN_OR_RETURN(ScanAttrs a, scan_attrs(node, body.outputs().size()));
  std::vector<TensorType> formals(a.n + a.m);
  std::vector<TensorType> state;
  for (size_t i = 0; i < a.n; ++i) state.push_back(ctx.input_type(i));
  Dim seq_len = Dim::unknown();
  bool seq_set = false;
  for (size_t j = 0; j < a.m; ++j) {
    const TensorType& t = ctx.input_type(a.n + j);
    if (!t.shape.rank_known()) {
      formals[a.n + j] = {t.dtype, Shape::unknown_rank()};
      continue;
    }
    int64_t rank = static_cast<int64_t>(t.shape.rank());
    FERRITE_RETURN_IF_ERROR(normalize_axis(node, a.in_axes[j], rank, "scan input", j));
    std::vector<Dim> dims = t.shape.dims();
    Dim len = dims[a.in_axes[j]];
    dims.erase(dims.begin() + a.in_axes[j]);
    formals[a.n + j] = {t.dtype, Shape(std::move(dims))};
    if (seq_set && len.value() && seq_len.value() && *len.value() != *seq_len.value())
      return ctx.error("scan inputs have sequence lengths ", seq_len.to_string(), " and ",
                       len.to_string());
    seq_len = !seq_set || seq_len == len ? len : Dim::unknown();
    seq_set = true;
  }
  FERRITE_RETURN_IF_ERROR(infer_carried(ctx, body, "body", formals, 0, 0, state));
  size_t k = body.outputs().size() - a.n;
  if (ctx.num_outputs() > a.n + k)
    return ctx.error("has ", ctx.num_outputs(), " outputs but its body yields ", a.n + k);
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (i < a.n) {
      ctx.set_output(i, state[i]);
      continue;
    }
    const TensorType& t = body.outputs()[i]->type;
    if (!t.shape.rank_known()) {
      ctx.set_output(i, t.dtype, Shape::unknown_rank());
      continue;
    }
    int64_t axis = a.out_axes[i - a.n];
    FERRITE_RETURN_IF_ERROR(normalize_axis(node, axis, static_cast<int64_t>(t.shape.rank()) + 1,
                                           "scan output", i - a.n));
    ctx.set_output(i, t.dtype, insert_dim(t.shape, axis, seq_len));
  }
  return Status::ok();
}

// SequenceMap: inputs (input_sequence, additional_inputs...), body (one element of each sequence
// input, each tensor input whole) -> one sequence per body output.
Status infer_sequence_map(InferContext& ctx) {
  const Node& node = ctx.node();
  std::vector<TensorType> formals;
  for (size_t i = 0; i < node.num_explicit_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("input ", i, " is missing");
    TensorType t = ctx.input_type(i);
    if (t.kind != ValueKind::kSequence && t.kind != ValueKind::kTensor)
      return ctx.error("input ", i, " must be a sequence or a tensor, got ", t.to_string());
    if (i == 0 && t.kind != ValueKind::kSequence)
      return ctx.error("input 0 must be a sequence, got ", t.to_string());
    t.kind = ValueKind::kTensor;
    formals.push_back(std::move(t));
  }
  Graph& body = subgraph_attr(ctx, "body");
  FERRITE_RETURN_IF_ERROR(infer_body(ctx, body, "body", formals));
  if (ctx.num_outputs() != body.outputs().size())
    return ctx.error("has ", ctx.num_outputs(), " outputs but its body yields ",
                     body.outputs().size());
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    TensorType t = body.outputs()[i]->type;
    if (!t.is_tensor())
      return ctx.error("subgraph 'body' output ", i, " is ", t.to_string(), ", not a tensor");
    t.kind = ValueKind::kSequence;
    ctx.set_output(i, std::move(t));
  }
  return Status::ok();
}

// ---- kernels ----------------------------------------------------------------------------------

Expected<bool> read_cond(const Node& node, const Tensor& t, const char* what) {
  if (t.dtype() != DType::kBool || !t.is_tensor() || t.numel() != 1)
    return err(node.describe(), ": ", what, " must be a bool tensor of one element, got ",
               t.type_string());
  return t.int_at(0) != 0;
}

// `t` as a value of kind `k`, where the two differ at most by optionality (kinds_compatible):
// wrapped into an optional, or the optional's value taken out.
Expected<Tensor> conform_kind(const KernelContext& ctx, Tensor t, ValueKind k, const char* what) {
  if (t.kind() == k) return t;
  if (is_optional_kind(k) && optional_element_kind(k) == t.kind())
    return Tensor::optional(k, t.dtype(), std::move(t));
  if (is_optional_kind(t.kind()) && optional_element_kind(t.kind()) == k) {
    if (t.items().empty())
      return ctx.error(what, " is an empty optional where its value is expected");
    return t.items()[0];
  }
  return ctx.error(what, " is ", t.type_string(), " where a value of another kind is expected");
}

// The node's captured inputs, which every body takes after its own inputs.
std::vector<Tensor> captured_inputs(const KernelContext& ctx) {
  std::vector<Tensor> out;
  for (size_t i = ctx.node().num_explicit_inputs(); i < ctx.num_inputs(); ++i)
    out.push_back(ctx.input(i));
  return out;
}

Expected<std::vector<Tensor>> run_body(const KernelContext& ctx, const GraphInterpreter& body,
                                       std::vector<Tensor> ins, const std::vector<Tensor>& caps,
                                       const char* attr) {
  ins.insert(ins.end(), caps.begin(), caps.end());
  auto outs = body.run(ins);
  if (!outs)
    return outs.status().with_context(str_cat(ctx.node().describe(), ": subgraph '", attr, "'"));
  return outs;
}

// Element `idx` of `t` along `axis` (the axis removed).
Expected<Tensor> take_along(const Tensor& t, size_t axis, int64_t idx) {
  std::vector<int64_t> dims = t.dims();
  int64_t len = dims[axis];
  dims.erase(dims.begin() + static_cast<int64_t>(axis));
  FERRITE_ASSIGN_OR_RETURN(Tensor out, Tensor::create_uninitialized(t.dtype(), dims));
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= t.dim(d);
  for (size_t d = axis + 1; d < t.rank(); ++d) inner *= t.dim(d);
  size_t bytes = static_cast<size_t>(inner) * dtype_size(t.dtype());
  const auto* src = static_cast<const uint8_t*>(t.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t o = 0; o < outer && bytes; ++o)
    std::memcpy(dst + o * bytes, src + (o * len + idx) * bytes, bytes);
  return out;
}

// Stacks `parts` (equal types) along a new `axis`; part t goes to position reverse ? L-1-t : t.
// `empty_dims` is the part shape used when there are no parts.
Expected<Tensor> stack_along(const KernelContext& ctx, const std::vector<Tensor>& parts,
                             size_t axis, bool reverse, DType dtype,
                             std::vector<int64_t> part_dims) {
  if (!parts.empty()) part_dims = parts[0].dims();
  for (size_t t = 1; t < parts.size(); ++t)
    if (parts[t].dtype() != parts[0].dtype() || parts[t].dims() != parts[0].dims())
      return ctx.error("scan output is ", parts[0].type_string(), " at iteration 0 but ",
                       parts[t].type_string(), " at iteration ", t);
  if (!parts.empty()) dtype = parts[0].dtype();
  int64_t len = static_cast<int64_t>(parts.size());
  std::vector<int64_t> dims = part_dims;
  dims.insert(dims.begin() + static_cast<int64_t>(axis), len);
  FERRITE_ASSIGN_OR_RETURN(Tensor out, Tensor::create_uninitialized(dtype, dims));
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= part_dims[d];
  for (size_t d = axis; d < part_dims.size(); ++d) inner *= part_dims[d];
  size_t bytes = static_cast<size_t>(inner) * dtype_size(dtype);
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t t = 0; t < len && bytes; ++t) {
    int64_t pos = reverse ? len - 1 - t : t;
    const auto* src = static_cast<const uint8_t*>(parts[t].raw());
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + (o * len + pos) * bytes, src + o * bytes, bytes);
  }
  return out;
}

// The static dims of a body output, 0 where unknown (for a scan output of zero iterations).
std::vector<int64_t> dims_or_zero(const Value* v) {
  std::vector<int64_t> dims;
  if (!v->type.shape.rank_known()) return dims;
  for (const Dim& d : v->type.shape.dims()) dims.push_back(d.value().value_or(0));
  return dims;
}

Status if_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  FERRITE_ASSIGN_OR_RETURN(bool cond, read_cond(node, ctx.input(0), "cond"));
  const char* attr = cond ? "then_branch" : "else_branch";
  const Graph& g = node.attrs.at(attr).g();
  if (!g.deferred_error.empty())
    return ctx.error(attr,
                     " runs, but it was invalid when the model was loaded: ", g.deferred_error);
  GraphInterpreter branch(g);
  FERRITE_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                           run_body(ctx, branch, {}, captured_inputs(ctx), attr));
  if (outs.size() < ctx.num_outputs())
    return ctx.error(attr, " produced ", outs.size(), " outputs, expected ", ctx.num_outputs());
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.has_output(i)) continue;
    FERRITE_ASSIGN_OR_RETURN(
        Tensor t, conform_kind(ctx, std::move(outs[i]), node.outputs[i]->type.kind, attr));
    ctx.set_output(i, std::move(t));
  }
  return Status::ok();
}

Status loop_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Graph& g = node.attrs.at("body").g();
  size_t n = node.num_explicit_inputs() - 2;
  size_t k = g.outputs().size() - 1 - n;
  int64_t max_trips = -1;  // none
  if (ctx.has_input(0)) {
    const Tensor& m = ctx.input(0);
    if (m.dtype() != DType::kI64 || m.numel() != 1)
      return ctx.error("trip count M must be an int64 tensor of one element, got ",
                       m.type_string());
    max_trips = m.int_at(0);
    if (max_trips < 0) return ctx.error("trip count M is negative (", max_trips, ")");
  }
  bool cond = true;
  if (ctx.has_input(1)) {
    FERRITE_ASSIGN_OR_RETURN(cond, read_cond(node, ctx.input(1), "cond"));
  }
  std::vector<Tensor> state;
  for (size_t i = 0; i < n; ++i) state.push_back(ctx.input(2 + i));
  std::vector<std::vector<Tensor>> scans(k);
  GraphInterpreter body(g);
  std::vector<Tensor> caps = captured_inputs(ctx);
  for (int64_t it = 0; cond && (max_trips < 0 || it < max_trips); ++it) {
    std::vector<Tensor> ins{Tensor::scalar<int64_t>(it), Tensor::scalar<bool>(cond)};
    for (size_t i = 0; i < n; ++i) {
      FERRITE_ASSIGN_OR_RETURN(Tensor v, conform_kind(ctx, state[i], g.inputs()[2 + i]->type.kind,
                                                      "loop-carried value"));
      ins.push_back(std::move(v));
    }
    FERRITE_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                             run_body(ctx, body, std::move(ins), caps, "body"));
    FERRITE_ASSIGN_OR_RETURN(cond, read_cond(node, outs[0], "the body's cond output"));
    for (size_t i = 0; i < n; ++i) state[i] = std::move(outs[1 + i]);
    for (size_t j = 0; j < k; ++j) scans[j].push_back(std::move(outs[1 + n + j]));
  }
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.has_output(i)) continue;
    if (i < n) {
      FERRITE_ASSIGN_OR_RETURN(
          Tensor t, conform_kind(ctx, state[i], node.outputs[i]->type.kind, "loop-carried value"));
      ctx.set_output(i, std::move(t));
      continue;
    }
    const Value* bv = g.outputs()[1 + i];
    FERRITE_ASSIGN_OR_RETURN(
        Tensor t, stack_along(ctx, scans[i - n], 0, false, bv->type.dtype, dims_or_zero(bv)));
    ctx.set_output(i, std::move(t));
  }
  return Status::ok();
}

// The sequence length of Scan's scan inputs (all must agree) and their normalised axes.
Expected<int64_t> scan_length(const KernelContext& ctx, ScanAttrs& a) {
  int64_t len = -1;
  for (size_t j = 0; j < a.m; ++j) {
    const Tensor& t = ctx.input(a.n + j);
    FERRITE_RETURN_IF_ERROR(
        normalize_axis(ctx.node(), a.in_axes[j], static_cast<int64_t>(t.rank()), "scan input", j));
    int64_t l = t.dim(static_cast<size_t>(a.in_axes[j]));
    if (len >= 0 && l != len)
      return ctx.error("scan inputs have sequence lengths ", len, " and ", l);
    len = l;
  }
  return len;
}

Status scan_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Graph& g = node.attrs.at("body").g();
  FERRITE_ASSIGN_OR_RETURN(ScanAttrs a, scan_attrs(node, g.outputs().size()));
  FERRITE_ASSIGN_OR_RETURN(int64_t len, scan_length(ctx, a));
  size_t k = g.outputs().size() - a.n;
  std::vector<Tensor> state;
  for (size_t i = 0; i < a.n; ++i) state.push_back(ctx.input(i));
  std::vector<std::vector<Tensor>> scans(k);
  GraphInterpreter body(g);
  std::vector<Tensor> caps = captured_inputs(ctx);
  for (int64_t t = 0; t < len; ++t) {
    std::vector<Tensor> ins = state;
    for (size_t j = 0; j < a.m; ++j) {
      int64_t idx = a.in_dirs[j] ? len - 1 - t : t;
      FERRITE_ASSIGN_OR_RETURN(
          Tensor slice, take_along(ctx.input(a.n + j), static_cast<size_t>(a.in_axes[j]), idx));
      ins.push_back(std::move(slice));
    }
    FERRITE_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                             run_body(ctx, body, std::move(ins), caps, "body"));
    for (size_t i = 0; i < a.n; ++i) state[i] = std::move(outs[i]);
    for (size_t j = 0; j < k; ++j) scans[j].push_back(std::move(outs[a.n + j]));
  }
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.has_output(i)) continue;
    if (i < a.n) {
      ctx.set_output(i, state[i]);
      continue;
    }
    const Value* bv = g.outputs()[i];
    std::vector<int64_t> part =
        scans[i - a.n].empty() ? dims_or_zero(bv) : scans[i - a.n][0].dims();
    int64_t axis = a.out_axes[i - a.n];
    FERRITE_RETURN_IF_ERROR(
        normalize_axis(node, axis, static_cast<int64_t>(part.size()) + 1, "scan output", i - a.n));
    FERRITE_ASSIGN_OR_RETURN(Tensor out,
                             stack_along(ctx, scans[i - a.n], static_cast<size_t>(axis),
                                         a.out_dirs[i - a.n] != 0, bv->type.dtype, part));
    ctx.set_output(i, std::move(out));
  }
  return Status::ok();
}

Status sequence_map_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Graph& g = node.attrs.at("body").g();
  const size_t nin = node.num_explicit_inputs();
  const Tensor& first = ctx.input(0);
  if (first.kind() != ValueKind::kSequence)
    return ctx.error("input 0 must be a sequence, got ", first.type_string());
  const size_t len = first.items().size();
  for (size_t i = 1; i < nin; ++i) {
    const Tensor& t = ctx.input(i);
    if (t.kind() == ValueKind::kSequence && t.items().size() != len)
      return ctx.error("input ", i, " is a sequence of ", t.items().size(),
                       " tensors but input 0 has ", len);
    if (t.kind() != ValueKind::kSequence && !t.is_tensor())
      return ctx.error("input ", i, " must be a sequence or a tensor, got ", t.type_string());
  }
  GraphInterpreter body(g);
  std::vector<Tensor> caps = captured_inputs(ctx);
  std::vector<std::vector<Tensor>> results(ctx.num_outputs());
  for (size_t k = 0; k < len; ++k) {
    std::vector<Tensor> ins;
    for (size_t i = 0; i < nin; ++i) {
      const Tensor& t = ctx.input(i);
      ins.push_back(t.is_tensor() ? t : t.items()[k]);
    }
    FERRITE_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                             run_body(ctx, body, std::move(ins), caps, "body"));
    for (size_t j = 0; j < results.size(); ++j) results[j].push_back(std::move(outs[j]));
  }
  for (size_t j = 0; j < results.size(); ++j)
    if (ctx.has_output(j))
      ctx.set_output(j, Tensor::sequence(node.outputs[j]->type.dtype, std::move(results[j])));
  return Status::ok();
}

}  // namespace

// Not foldable: folding would run a body, of any trip count, while importing.
void register_control_flow_ops(OpRegistry& r) {
  r.add(OpSchemaBuilder("If")
            .versions(11)
            .inputs(1, INT_MAX)
            .outputs(1, INT_MAX)
            .required_attr("then_branch", AttrType::kGraph)
            .required_attr("else_branch", AttrType::kGraph)
            .any_value_kind()
            .not_foldable()
            .infer(infer_if)
            .kernel(if_kernel)
            .doc("Runs then_branch or else_branch by a bool scalar."));
  // M and cond may be omitted (null): infer_loop checks that both positions exist.
  r.add(
      OpSchemaBuilder("Loop")
          .versions(11)
          .inputs(0, INT_MAX)
          .outputs(1, INT_MAX)
          .required_attr("body", AttrType::kGraph)
          .any_value_kind()
          .not_foldable()
          .infer(infer_loop)
          .kernel(loop_kernel)
          .doc("Runs body up to M times while cond holds; loop-carried values and scan outputs."));
  r.add(OpSchemaBuilder("Scan")
            .versions(9)
            .inputs(1, INT_MAX)
            .outputs(1, INT_MAX)
            .required_attr("body", AttrType::kGraph)
            .required_attr("num_scan_inputs", AttrType::kInt)
            .optional_attr("scan_input_axes", AttrType::kInts)
            .optional_attr("scan_input_directions", AttrType::kInts)
            .optional_attr("scan_output_axes", AttrType::kInts)
            .optional_attr("scan_output_directions", AttrType::kInts)
            .not_foldable()
            .infer(infer_scan)
            .kernel(scan_kernel)
            .doc("Runs body over slices of the scan inputs, carrying state; stacks scan outputs."));
  r.add(OpSchemaBuilder("SequenceMap")
            .versions(17)
            .inputs(1, INT_MAX)
            .outputs(1, INT_MAX)
            .required_attr("body", AttrType::kGraph)
            .any_value_kind()
            .not_foldable()
            .infer(infer_sequence_map)
            .kernel(sequence_map_kernel)
            .doc("Runs body on each element of the sequence inputs (tensor inputs whole); the "
                 "outputs are sequences."));
}

}  // namespace ferrite
