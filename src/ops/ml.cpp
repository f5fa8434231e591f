// Ops of the ai.onnx.ml domain (version 1) over numeric tensors: Binarizer and
// ArrayFeatureExtractor. (The string-keyed ones, such as LabelEncoder, need a string type.)
#include "ops/elementwise_util.h"
#include "ops/helpers.h"
#include "ops/numeric_cast.h"

namespace ferrite {

namespace {

const char* const kMl = "ai.onnx.ml";

// y = x > threshold ? 1 : 0, in x's type.
Status binarizer_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double threshold = ctx.node().attr_float("threshold", 0);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.dims()));
  return dispatch_dtype<TypeClass::kNumeric>(ctx, x.dtype(), [&]<class T>() -> Status {
    for (int64_t i = 0; i < x.numel(); ++i)
      y->data<T>()[i] = convert<T>(to_double(x.data<T>()[i]) > threshold ? 1.0 : 0.0);
    return Status::ok();
  });
}

// Elements of x's last axis at the given indices: [..., len(indices)] (a 1-D x gives [1, n]).
Status infer_array_feature_extractor(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& idx = ctx.input_shape(1);
  if (!x.rank_known() || !idx.rank_known()) {
    ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
    return Status::ok();
  }
  if (x.rank() == 0) return ctx.error("X must have rank >= 1");
  Dim count(int64_t{1});
  for (const Dim& d : idx.dims()) count = count * d;
  std::vector<Dim> out = x.rank() == 1 ? std::vector<Dim>{Dim(int64_t{1})}
                                       : std::vector<Dim>(x.dims().begin(), x.dims().end() - 1);
  out.push_back(count);
  ctx.set_output(0, ctx.input_dtype(0), Shape(std::move(out)));
  return Status::ok();
}

Status array_feature_extractor_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  if (x.rank() == 0 || idx.dtype() != DType::kI64)
    return ctx.error("X must have rank >= 1, Y int64");
  const int64_t last = x.dims().back(), rows = x.numel() / std::max<int64_t>(last, 1);
  const int64_t* pi = idx.data<int64_t>();
  for (int64_t k = 0; k < idx.numel(); ++k)
    if (pi[k] < 0 || pi[k] >= last)
      return ctx.error("index ", pi[k], " is outside [0, ", last, ")");
  std::vector<int64_t> dims = x.rank() == 1
                                  ? std::vector<int64_t>{1}
                                  : std::vector<int64_t>(x.dims().begin(), x.dims().end() - 1);
  dims.push_back(idx.numel());
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), dims));
  const size_t es = dtype_size(x.dtype());
  const auto* px = static_cast<const char*>(x.raw());
  auto* py = static_cast<char*>(y->raw());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < idx.numel(); ++k)
      std::copy_n(px + (r * last + pi[k]) * es, es, py + (r * idx.numel() + k) * es);
  return Status::ok();
}

}  // namespace

void register_ml_ops(OpRegistry& r) {
  constexpr DTypeSet kMlNumeric{DType::kF32, DType::kF64, DType::kI64, DType::kI32};
  r.add(OpSchemaBuilder("Binarizer", kMl)
            .versions(1)
            .inputs(1)
            .outputs(1)
            .attr("threshold", AttrType::kFloat, 0.0f)
            .types("T", {0}, kMlNumeric)
            .infer(infer_same_as_input())
            .kernel(binarizer_kernel));
  r.add(OpSchemaBuilder("ArrayFeatureExtractor", kMl)
            .versions(1)
            .inputs(2)
            .outputs(1)
            .types("T", {0}, kMlNumeric)
            .types("tensor(int64)", {1}, {DType::kI64})
            .infer(infer_array_feature_extractor)
            .kernel(array_feature_extractor_kernel));
}

}  // namespace ferrite
