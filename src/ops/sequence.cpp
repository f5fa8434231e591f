// Sequences and optionals (ir/value_kind.h): SequenceEmpty, SequenceConstruct, SequenceInsert,
// SequenceAt, SequenceErase, SequenceLength, SplitToSequence, ConcatFromSequence, Optional,
// OptionalHasElement and OptionalGetElement. SequenceMap runs a subgraph, so it lives with the
// control flow (control_flow.cpp). The values ride in Tensors (Tensor::sequence, ::optional) and
// these kernels run on the host on every device (execute/prepare.cpp): they move whole tensors
// around, which no device kernel would do faster.
#include <algorithm>
#include <cstring>

#include "ops/context.h"
#include "ops/op_schema.h"

namespace ferrite {

namespace {

const char* kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::kTensor:
      return "a tensor";
    case ValueKind::kSequence:
      return "a sequence";
    case ValueKind::kOptionalTensor:
      return "an optional tensor";
    case ValueKind::kOptionalSequence:
      return "an optional sequence";
  }
  return "?";
}

TensorType with_kind(TensorType t, ValueKind k) {
  t.kind = k;
  return t;
}

// ---- inference --------------------------------------------------------------------------------

Status require_kind(const InferContext& ctx, size_t i, ValueKind k, const char* what) {
  if (ctx.input_type(i).kind != k)
    return ctx.error(what, " (input ", i, ") must be ", kind_name(k), ", got ",
                     ctx.input_type(i).to_string());
  return Status::ok();
}

// A position input: an int32 or int64 tensor of one element (ONNX: a scalar).
Status check_position_type(const InferContext& ctx, size_t i) {
  const TensorType& t = ctx.input_type(i);
  bool one = !t.shape.rank_known() || t.shape.rank() == 0 ||
             (t.shape.rank() == 1 && (!t.shape[0].value() || *t.shape[0].value() == 1));
  if (!t.is_tensor() || (t.dtype != DType::kI32 && t.dtype != DType::kI64) || !one)
    return ctx.error("position (input ", i, ") must be an int32 or int64 scalar, got ",
                     t.to_string());
  return Status::ok();
}

Status infer_sequence_empty(InferContext& ctx) {
  auto dt = dtype_from_onnx(static_cast<int>(ctx.node().attr_int("dtype", 1)));
  if (!dt) return ctx.error("dtype ", ctx.node().attr_int("dtype", 1), " is not supported");
  ctx.set_output(0, {*dt, Shape::unknown_rank(), ValueKind::kSequence});
  return Status::ok();
}

Status infer_sequence_construct(InferContext& ctx) {
  TensorType elem;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("input ", i, " is missing");
    FERRITE_RETURN_IF_ERROR(require_kind(ctx, i, ValueKind::kTensor, "every input"));
    const TensorType& t = ctx.input_type(i);
    if (i > 0 && t.dtype != elem.dtype)
      return ctx.error("inputs must share one dtype, got ", dtype_name(elem.dtype), " and ",
                       dtype_name(t.dtype));
    elem = i == 0 ? t : merge_types(elem, t);
  }
  ctx.set_output(0, with_kind(elem, ValueKind::kSequence));
  return Status::ok();
}

Status infer_sequence_insert(InferContext& ctx) {
  FERRITE_RETURN_IF_ERROR(require_kind(ctx, 0, ValueKind::kSequence, "input_sequence"));
  FERRITE_RETURN_IF_ERROR(require_kind(ctx, 1, ValueKind::kTensor, "tensor"));
  if (ctx.has_input(2)) FERRITE_RETURN_IF_ERROR(check_position_type(ctx, 2));
  const TensorType& seq = ctx.input_type(0);
  const TensorType& t = ctx.input_type(1);
  if (seq.dtype != t.dtype)
    return ctx.error("tensor is ", dtype_name(t.dtype), " but the sequence holds ",
                     dtype_name(seq.dtype));
  ctx.set_output(0, with_kind(merge_types(t, seq), ValueKind::kSequence));
  return Status::ok();
}

Status infer_sequence_at(InferContext& ctx) {
  FERRITE_RETURN_IF_ERROR(require_kind(ctx, 0, ValueKind::kSequence, "input_sequence"));
  FERRITE_RETURN_IF_ERROR(check_position_type(ctx, 1));
  ctx.set_output(0, with_kind(ctx.input_type(0), ValueKind::kTensor));
  return Status::ok();
}

Status infer_sequence_erase(InferContext& ctx) {
  FERRITE_RETURN_IF_ERROR(require_kind(ctx, 0, ValueKind::kSequence, "input_sequence"));
  if (ctx.has_input(1)) FERRITE_RETURN_IF_ERROR(check_position_type(ctx, 1));
  ctx.set_output(0, ctx.input_type(0));
  return Status::ok();
}

Status infer_sequence_length(InferContext& ctx) {
  FERRITE_RETURN_IF_ERROR(require_kind(ctx, 0, ValueKind::kSequence, "input_sequence"));
  ctx.set_output(0, DType::kI64, Shape::scalar());
  return Status::ok();
}

Status infer_split_to_sequence(InferContext& ctx) {
  FERRITE_RETURN_IF_ERROR(require_kind(ctx, 0, ValueKind::kTensor, "input"));
  const TensorType& in = ctx.input_type(0);
  if (ctx.has_input(1)) {
    const TensorType& s = ctx.input_type(1);
    if (!s.is_tensor() || (s.dtype != DType::kI32 && s.dtype != DType::kI64) ||
        (s.shape.rank_known() && s.shape.rank() > 1))
      return ctx.error("split must be an int32 or int64 scalar or 1-d tensor, got ", s.to_string());
  }
  if (!in.shape.rank_known()) {
    ctx.set_output(0, {in.dtype, Shape::unknown_rank(), ValueKind::kSequence});
    return Status::ok();
  }
  int64_t rank = static_cast<int64_t>(in.shape.rank());
  int64_t axis = ctx.node().attr_int("axis", 0);
  if (axis < -rank || axis >= rank)
    return ctx.error("axis ", axis, " is outside [", -rank, ", ", rank - 1, "]");
  if (axis < 0) axis += rank;
  std::vector<Dim> dims = in.shape.dims();
  if (ctx.has_input(1))
    dims[axis] = Dim::unknown();  // chunk sizes may differ (the last one, or a split list)
  else if (ctx.node().attr_int("keepdims", 1))
    dims[axis] = Dim(1);
  else
    dims.erase(dims.begin() + axis);
  ctx.set_output(0, {in.dtype, Shape(std::move(dims)), ValueKind::kSequence});
  return Status::ok();
}

Status infer_concat_from_sequence(InferContext& ctx) {
  FERRITE_RETURN_IF_ERROR(require_kind(ctx, 0, ValueKind::kSequence, "input_sequence"));
  const TensorType& elem = ctx.input_type(0);
  bool new_axis = ctx.node().attr_int("new_axis", 0) != 0;
  if (!elem.shape.rank_known()) {
    ctx.set_output(0, elem.dtype, Shape::unknown_rank());
    return Status::ok();
  }
  int64_t rank = static_cast<int64_t>(elem.shape.rank()) + (new_axis ? 1 : 0);
  int64_t axis = ctx.node().attr_int("axis");
  if (rank == 0 || axis < -rank || axis >= rank)
    return ctx.error("axis ", axis, " is outside [", -rank, ", ", rank - 1, "] for elements ",
                     elem.to_string(), new_axis ? " and new_axis" : "");
  if (axis < 0) axis += rank;
  std::vector<Dim> dims = elem.shape.dims();
  if (new_axis)
    dims.insert(dims.begin() + axis, Dim::unknown());  // the sequence's length
  else
    dims[axis] = Dim::unknown();  // the sum over the elements
  ctx.set_output(0, elem.dtype, Shape(std::move(dims)));
  return Status::ok();
}

// Optional's `type` attribute is imported as ints {ValueKind, DType} (onnx/importer.cpp).
Status infer_optional(InferContext& ctx) {
  if (ctx.has_input(0)) {
    ValueKind k = ctx.input_type(0).kind;
    if (k != ValueKind::kTensor && k != ValueKind::kSequence)
      return ctx.error("input must be a tensor or a sequence, got ", ctx.input_type(0).to_string());
    ctx.set_output(
        0, with_kind(ctx.input_type(0), k == ValueKind::kTensor ? ValueKind::kOptionalTensor
                                                                : ValueKind::kOptionalSequence));
    return Status::ok();
  }
  std::vector<int64_t> type = ctx.node().attr_ints("type");
  if (type.size() != 2) return ctx.error("has neither an input nor a 'type' attribute");
  auto kind = static_cast<ValueKind>(type[0]);
  auto dtype = static_cast<DType>(type[1]);
  if ((kind != ValueKind::kTensor && kind != ValueKind::kSequence) || dtype == DType::kUndefined)
    return ctx.error("'type' must be a tensor or sequence type");
  ctx.set_output(
      0, {dtype, Shape::unknown_rank(),
          kind == ValueKind::kTensor ? ValueKind::kOptionalTensor : ValueKind::kOptionalSequence});
  return Status::ok();
}

Status infer_optional_has_element(InferContext& ctx) {
  if (ctx.has_input(0) && ctx.opset() < 18 && !is_optional_kind(ctx.input_type(0).kind))
    return ctx.error("input must be an optional before opset 18, got ",
                     ctx.input_type(0).to_string());
  ctx.set_output(0, DType::kBool, Shape::scalar());
  return Status::ok();
}

// From opset 18 a tensor or sequence passes through (it is an optional that holds it).
Status infer_optional_get_element(InferContext& ctx) {
  const TensorType& t = ctx.input_type(0);
  if (ctx.opset() < 18 && !is_optional_kind(t.kind))
    return ctx.error("input must be an optional before opset 18, got ", t.to_string());
  ctx.set_output(0, with_kind(t, optional_element_kind(t.kind)));
  return Status::ok();
}

// ---- kernels ----------------------------------------------------------------------------------

Expected<const Tensor*> input_of_kind(const KernelContext& ctx, size_t i, ValueKind k,
                                      const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.kind() != k)
    return ctx.error(what, " (input ", i, ") must be ", kind_name(k), ", got ", t.type_string());
  return &t;
}

// Position input i normalised into [0, n) (or [0, n] where `end_ok`: an insert at the end).
Expected<int64_t> position(const KernelContext& ctx, size_t i, int64_t n, bool end_ok) {
  const Tensor& p = ctx.input(i);
  if (!p.is_tensor() || (p.dtype() != DType::kI32 && p.dtype() != DType::kI64) || p.numel() != 1)
    return ctx.error("position must be an int32 or int64 scalar, got ", p.type_string());
  int64_t v = p.int_at(0), hi = end_ok ? n : n - 1;
  if (v < -n || v > hi)
    return ctx.error("position ", v, " is out of range [", -n, ", ", hi, "] for a sequence of ", n,
                     " tensors");
  return v < 0 ? v + n : v;
}

Status sequence_empty_kernel(KernelContext& ctx) {
  auto dt = dtype_from_onnx(static_cast<int>(ctx.node().attr_int("dtype", 1)));
  if (!dt) return ctx.error("dtype is not supported");
  ctx.set_output(0, Tensor::sequence(*dt, {}));
  return Status::ok();
}

Status sequence_construct_kernel(KernelContext& ctx) {
  std::vector<Tensor> items;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    FERRITE_ASSIGN_OR_RETURN(const Tensor* t, input_of_kind(ctx, i, ValueKind::kTensor, "input"));
    if (t->dtype() != ctx.input(0).dtype())
      return ctx.error("inputs must share one dtype, got ", ctx.input(0).type_string(), " and ",
                       t->type_string());
    items.push_back(*t);
  }
  ctx.set_output(0, Tensor::sequence(ctx.input(0).dtype(), std::move(items)));
  return Status::ok();
}

Status sequence_insert_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(const Tensor* seq,
                           input_of_kind(ctx, 0, ValueKind::kSequence, "input_sequence"));
  FERRITE_ASSIGN_OR_RETURN(const Tensor* t, input_of_kind(ctx, 1, ValueKind::kTensor, "tensor"));
  if (t->dtype() != seq->dtype())
    return ctx.error("tensor is ", t->type_string(), " but the sequence holds ",
                     dtype_name(seq->dtype()));
  std::vector<Tensor> items = seq->items();
  int64_t n = static_cast<int64_t>(items.size()), at = n;
  if (ctx.has_input(2)) {
    FERRITE_ASSIGN_OR_RETURN(at, position(ctx, 2, n, true));
  }
  items.insert(items.begin() + at, *t);
  ctx.set_output(0, Tensor::sequence(seq->dtype(), std::move(items)));
  return Status::ok();
}

Status sequence_at_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(const Tensor* seq,
                           input_of_kind(ctx, 0, ValueKind::kSequence, "input_sequence"));
  int64_t n = static_cast<int64_t>(seq->items().size());
  FERRITE_ASSIGN_OR_RETURN(int64_t at, position(ctx, 1, n, false));
  ctx.set_output(0, seq->items()[at]);
  return Status::ok();
}

Status sequence_erase_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(const Tensor* seq,
                           input_of_kind(ctx, 0, ValueKind::kSequence, "input_sequence"));
  std::vector<Tensor> items = seq->items();
  int64_t n = static_cast<int64_t>(items.size()), at = n - 1;
  if (ctx.has_input(1)) {
    FERRITE_ASSIGN_OR_RETURN(at, position(ctx, 1, n, false));
  } else if (n == 0) {
    return ctx.error("cannot erase from an empty sequence");
  }
  items.erase(items.begin() + at);
  ctx.set_output(0, Tensor::sequence(seq->dtype(), std::move(items)));
  return Status::ok();
}

Status sequence_length_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(const Tensor* seq,
                           input_of_kind(ctx, 0, ValueKind::kSequence, "input_sequence"));
  ctx.set_output(0, Tensor::scalar<int64_t>(static_cast<int64_t>(seq->items().size())));
  return Status::ok();
}

// Elements [start, start + len) of `t` along `axis`.
Expected<Tensor> slice_axis(const Tensor& t, size_t axis, int64_t start, int64_t len) {
  std::vector<int64_t> dims = t.dims();
  int64_t full = dims[axis];
  dims[axis] = len;
  FERRITE_ASSIGN_OR_RETURN(Tensor out, Tensor::create_uninitialized(t.dtype(), dims));
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= t.dim(d);
  for (size_t d = axis + 1; d < t.rank(); ++d) inner *= t.dim(d);
  size_t row = static_cast<size_t>(inner) * dtype_size(t.dtype());
  const auto* src = static_cast<const uint8_t*>(t.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t o = 0; o < outer && row && len; ++o)
    std::memcpy(dst + o * len * row, src + (o * full + start) * row, len * row);
  return out;
}

// The chunk lengths SplitToSequence cuts an axis of length `dim` into.
Expected<std::vector<int64_t>> split_lengths(const KernelContext& ctx, int64_t dim) {
  if (!ctx.has_input(1)) return std::vector<int64_t>(static_cast<size_t>(dim), 1);
  const Tensor& s = ctx.input(1);
  if (!s.is_tensor() || (s.dtype() != DType::kI32 && s.dtype() != DType::kI64) || s.rank() > 1)
    return ctx.error("split must be an int32 or int64 scalar or 1-d tensor, got ", s.type_string());
  std::vector<int64_t> out;
  if (s.rank() == 0) {
    int64_t c = s.int_at(0);
    if (c <= 0) return ctx.error("split ", c, " must be positive");
    for (int64_t at = 0; at < dim; at += c) out.push_back(std::min(c, dim - at));
    return out;
  }
  int64_t sum = 0;
  for (int64_t i = 0; i < s.numel(); ++i) {
    int64_t c = s.int_at(i);
    if (c < 0 || __builtin_add_overflow(sum, c, &sum))
      return ctx.error("split lengths must be non-negative, got ", c);
    out.push_back(c);
  }
  if (sum != dim) return ctx.error("split lengths sum to ", sum, " but the axis has ", dim);
  return out;
}

Status split_to_sequence_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(const Tensor* in, input_of_kind(ctx, 0, ValueKind::kTensor, "input"));
  int64_t rank = static_cast<int64_t>(in->rank());
  int64_t axis = ctx.node().attr_int("axis", 0);
  if (axis < -rank || axis >= rank)
    return ctx.error("axis ", axis, " is outside [", -rank, ", ", rank - 1, "]");
  if (axis < 0) axis += rank;
  FERRITE_ASSIGN_OR_RETURN(std::vector<int64_t> lens, split_lengths(ctx, in->dim(axis)));
  bool squeeze = !ctx.has_input(1) && ctx.node().attr_int("keepdims", 1) == 0;
  std::vector<Tensor> items;
  int64_t start = 0;
  for (int64_t len : lens) {
    FERRITE_ASSIGN_OR_RETURN(Tensor part, slice_axis(*in, static_cast<size_t>(axis), start, len));
    if (squeeze) {
      std::vector<int64_t> dims = part.dims();
      dims.erase(dims.begin() + axis);
      part = part.reshaped(std::move(dims));
    }
    items.push_back(std::move(part));
    start += len;
  }
  ctx.set_output(0, Tensor::sequence(in->dtype(), std::move(items)));
  return Status::ok();
}

Status concat_from_sequence_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(const Tensor* seq,
                           input_of_kind(ctx, 0, ValueKind::kSequence, "input_sequence"));
  const std::vector<Tensor>& items = seq->items();
  if (items.empty()) return ctx.error("cannot concatenate an empty sequence");
  bool new_axis = ctx.node().attr_int("new_axis", 0) != 0;
  int64_t rank = static_cast<int64_t>(items[0].rank()) + (new_axis ? 1 : 0);
  int64_t axis = ctx.node().attr_int("axis");
  if (rank == 0 || axis < -rank || axis >= rank)
    return ctx.error("axis ", axis, " is outside [", -rank, ", ", rank - 1, "] for elements ",
                     items[0].type_string());
  if (axis < 0) axis += rank;
  // Each element as rank-`rank` dims (new_axis: a 1 inserted at the axis).
  auto dims_of = [&](const Tensor& t) {
    std::vector<int64_t> d = t.dims();
    if (new_axis) d.insert(d.begin() + axis, 1);
    return d;
  };
  std::vector<int64_t> out_dims = dims_of(items[0]);
  out_dims[axis] = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    std::vector<int64_t> d = dims_of(items[k]);
    bool same =
        items[k].is_tensor() && items[k].dtype() == items[0].dtype() && d.size() == out_dims.size();
    for (size_t j = 0; same && j < d.size(); ++j)
      same = static_cast<int64_t>(j) == axis || d[j] == out_dims[j];
    if (!same)
      return ctx.error("element ", k, " is ", items[k].type_string(),
                       ", which does not concatenate", " with element 0 (", items[0].type_string(),
                       ") along axis ", axis);
    out_dims[axis] += d[axis];
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor * out,
                           ctx.allocate_output_uninitialized(0, items[0].dtype(), out_dims));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out_dims[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < out_dims.size(); ++d) inner *= out_dims[d];
  size_t esize = dtype_size(items[0].dtype());
  auto* dst = static_cast<uint8_t*>(out->raw());
  size_t out_row = static_cast<size_t>(out_dims[axis] * inner) * esize;
  size_t offset = 0;
  for (const Tensor& t : items) {
    size_t row = static_cast<size_t>(dims_of(t)[axis] * inner) * esize;
    const auto* src = static_cast<const uint8_t*>(t.raw());
    for (int64_t o = 0; o < outer && row; ++o)
      std::memcpy(dst + o * out_row + offset, src + o * row, row);
    offset += row;
  }
  return Status::ok();
}

Status optional_kernel(KernelContext& ctx) {
  const Value* out = ctx.node().outputs[0];
  if (!ctx.has_input(0)) {
    ctx.set_output(0, Tensor::optional(out->type.kind, out->type.dtype, std::nullopt));
    return Status::ok();
  }
  const Tensor& in = ctx.input(0);
  if (in.kind() != ValueKind::kTensor && in.kind() != ValueKind::kSequence)
    return ctx.error("input must be a tensor or a sequence, got ", in.type_string());
  ValueKind k = in.is_tensor() ? ValueKind::kOptionalTensor : ValueKind::kOptionalSequence;
  ctx.set_output(0, Tensor::optional(k, in.dtype(), in));
  return Status::ok();
}

Status optional_has_element_kernel(KernelContext& ctx) {
  bool has = false;
  if (ctx.has_input(0)) {
    const Tensor& in = ctx.input(0);
    has = is_optional_kind(in.kind()) ? !in.items().empty() : true;
  }
  ctx.set_output(0, Tensor::scalar<bool>(has));
  return Status::ok();
}

Status optional_get_element_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  if (!is_optional_kind(in.kind())) {
    ctx.set_output(0, in);
    return Status::ok();
  }
  if (in.items().empty()) return ctx.error("the optional input is empty (holds no value)");
  ctx.set_output(0, in.items()[0]);
  return Status::ok();
}

}  // namespace

// Not foldable: a sequence or optional is never a compile-time constant (context.cpp), and the
// tensor results (SequenceAt, ConcatFromSequence) have sequence inputs that are not either.
// clang-format off
void register_sequence_ops(OpRegistry& r) {
  const DTypeSet kElem = dtypes::kNumeric | DTypeSet{DType::kBool};
  r.add(OpSchemaBuilder("SequenceEmpty").versions(11).inputs(0).outputs(1)
            .optional_attr("dtype", AttrType::kInt).any_value_kind().not_foldable()
            .infer(infer_sequence_empty).kernel(sequence_empty_kernel)
            .doc("An empty sequence of tensors of `dtype` (default float)."));
  r.add(OpSchemaBuilder("SequenceConstruct").versions(11).inputs(1, INT_MAX).outputs(1)
            .types("T", {0}, kElem).any_value_kind().not_foldable()
            .infer(infer_sequence_construct).kernel(sequence_construct_kernel)
            .doc("The sequence of its input tensors (one dtype)."));
  r.add(OpSchemaBuilder("SequenceInsert").versions(11).inputs(2, 3).outputs(1)
            .types("T", {0, 1}, kElem).any_value_kind().not_foldable()
            .infer(infer_sequence_insert).kernel(sequence_insert_kernel)
            .doc("The sequence with `tensor` inserted at `position` (default: the end)."));
  r.add(OpSchemaBuilder("SequenceAt").versions(11).inputs(2).outputs(1)
            .types("T", {0}, kElem).any_value_kind().not_foldable()
            .infer(infer_sequence_at).kernel(sequence_at_kernel)
            .doc("The tensor at `position` (negative counts from the end)."));
  r.add(OpSchemaBuilder("SequenceErase").versions(11).inputs(1, 2).outputs(1)
            .types("T", {0}, kElem).any_value_kind().not_foldable()
            .infer(infer_sequence_erase).kernel(sequence_erase_kernel)
            .doc("The sequence without the tensor at `position` (default: the last)."));
  r.add(OpSchemaBuilder("SequenceLength").versions(11).inputs(1).outputs(1)
            .types("T", {0}, kElem).any_value_kind().not_foldable()
            .infer(infer_sequence_length).kernel(sequence_length_kernel)
            .doc("The number of tensors in the sequence (int64 scalar)."));
  r.add(OpSchemaBuilder("SplitToSequence").versions(11).inputs(1, 2).outputs(1)
            .attr("axis", AttrType::kInt, int64_t{0}).attr("keepdims", AttrType::kInt, int64_t{1})
            .types("T", {0}, kElem).any_value_kind().not_foldable()
            .infer(infer_split_to_sequence).kernel(split_to_sequence_kernel)
            .doc("Splits a tensor along `axis` into a sequence (by `split`, or into 1s)."));
  r.add(OpSchemaBuilder("ConcatFromSequence").versions(11).inputs(1).outputs(1)
            .required_attr("axis", AttrType::kInt).attr("new_axis", AttrType::kInt, int64_t{0})
            .types("T", {0}, kElem).any_value_kind().not_foldable()
            .infer(infer_concat_from_sequence).kernel(concat_from_sequence_kernel)
            .doc("Concatenates (new_axis: stacks) the sequence's tensors along `axis`."));
  r.add(OpSchemaBuilder("Optional").versions(15).inputs(0, 1).outputs(1)
            .optional_attr("type", AttrType::kInts).any_value_kind().not_foldable()
            .infer(infer_optional).kernel(optional_kernel)
            .doc("An optional holding the input, or an empty one of `type`."));
  r.add(OpSchemaBuilder("OptionalHasElement").versions(15).inputs(0, 1).outputs(1)
            .any_value_kind().not_foldable()
            .infer(infer_optional_has_element).kernel(optional_has_element_kernel)
            .doc("Whether the optional holds a value (from 18: a tensor or sequence does)."));
  r.add(OpSchemaBuilder("OptionalGetElement").versions(15).inputs(1).outputs(1)
            .any_value_kind().not_foldable()
            .infer(infer_optional_get_element).kernel(optional_get_element_kernel)
            .doc("The optional's value (an error when empty); from 18 a tensor or sequence "
                 "passes through."));
}
// clang-format on

}  // namespace ferrite
