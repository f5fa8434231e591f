// Collective ops of the com.microsoft domain (version 1), with ONNX Runtime's names and
// attributes so that sharded graphs interoperate:
//   AllReduce(x_1..x_n) -> y_i = sum over ranks of x_i
//   AllGather(x_1..x_n) {group_size, axis} -> y_i = the ranks' x_i concatenated along axis
//   ReduceScatter(x_1..x_n) {group_size, axis} -> y_i = this rank's 1/group_size of the sum,
//                                                    split along axis
// (ONNX Runtime defines ReduceScatter only for training, under another name; this one mirrors
// AllGather.) The kernels exchange data through the communicator bound to the running thread
// (ops/communicator.h); without one a collective is an error that says how to run it. Devices
// with their own collectives library (NCCL on cuda) run these nodes as library ops instead.
#include <cstring>

#include "ops/communicator.h"
#include "ops/context.h"
#include "ops/helpers.h"

namespace ferrite {

namespace {

const char* const kMicrosoft = "com.microsoft";
constexpr int64_t kMaxGroup = 1024;

Expected<Communicator*> communicator(const KernelContext& ctx) {
  Communicator* c = bound_communicator();
  if (!c)
    return ctx.error(
        "a collective runs only in a tensor-parallel run (`ferrite run "
        "--tensor-parallel N`, or Session(tensor_parallel=N)): no communicator");
  return c;
}

Status check_group(const KernelContext& ctx, const Communicator& c) {
  int64_t g = ctx.node().attr_int("group_size", 1);
  if (g != c.size())
    return ctx.error("group_size ", g, " but the run has ", c.size(), " ranks (", c.describe(),
                     ")");
  return Status::ok();
}

Status infer_gather_scatter(InferContext& ctx, bool gather) {
  const int64_t g = ctx.node().attr_int("group_size", 1);
  // A group is ranks of one host's devices or threads: a bound that also keeps dims from
  // overflowing on a hostile attribute.
  if (g < 1 || g > kMaxGroup) return ctx.error("group_size must be in 1..", kMaxGroup, ", got ", g);
  if (ctx.num_inputs() != ctx.num_outputs())
    return ctx.error("takes as many inputs as it has outputs");
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input_type(i);
    if (!t.shape.rank_known()) {
      ctx.set_output(i, t);
      continue;
    }
    FERRITE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.node().attr_int("axis", 0),
                                                          static_cast<int64_t>(t.shape.rank())));
    Shape s = t.shape;
    Dim& d = s.dims()[static_cast<size_t>(axis)];
    if (gather) {
      if (auto v = d.value(); v && *v > (int64_t{1} << 40))
        return ctx.error("input ", i, " has ", *v, " along axis ", axis, ": too large to gather");
      d = d * Dim(g);
    } else {
      if (auto v = d.value(); v && *v % g != 0)
        return ctx.error("input ", i, " has ", *v, " along axis ", axis,
                         ", not a multiple of group_size ", g);
      d = d.floordiv(Dim(g));
    }
    ctx.set_output(i, t.dtype, std::move(s));
  }
  return Status::ok();
}

// Dims around `axis`: outer (product before), len, inner (product after).
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};
AxisSplit split_at(const std::vector<int64_t>& dims, int64_t axis) {
  AxisSplit s;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (static_cast<int64_t>(k) < axis) s.outer *= dims[k];
    if (static_cast<int64_t>(k) == axis) s.len = dims[k];
    if (static_cast<int64_t>(k) > axis) s.inner *= dims[k];
  }
  return s;
}

// Copies blocks between the layouts [groups][outer][chunk] and [outer][groups][chunk] (chunk in
// bytes); `to_outer_major` picks the direction.
void permute_blocks(const uint8_t* src, uint8_t* dst, int64_t groups, int64_t outer, size_t chunk,
                    bool to_outer_major) {
  for (int64_t r = 0; r < groups; ++r)
    for (int64_t o = 0; o < outer; ++o) {
      size_t gm = static_cast<size_t>(r * outer + o) * chunk;
      size_t om = static_cast<size_t>(o * groups + r) * chunk;
      if (to_outer_major)
        std::memcpy(dst + om, src + gm, chunk);
      else
        std::memcpy(dst + gm, src + om, chunk);
    }
}

Status all_reduce_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(Communicator * c, communicator(ctx));
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i);
    FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output_uninitialized(i, x.dtype(), x.dims()));
    FERRITE_RETURN_IF_ERROR(c->all_reduce_sum(x.raw(), y->raw(), x.numel(), x.dtype())
                                .with_context(ctx.node().describe()));
  }
  return Status::ok();
}

Status all_gather_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(Communicator * c, communicator(ctx));
  FERRITE_RETURN_IF_ERROR(check_group(ctx, *c));
  const int64_t g = c->size();
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i);
    FERRITE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.node().attr_int("axis", 0),
                                                          static_cast<int64_t>(x.rank())));
    std::vector<int64_t> dims = x.dims();
    dims[static_cast<size_t>(axis)] *= g;
    FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output_uninitialized(i, x.dtype(), dims));
    AxisSplit s = split_at(x.dims(), axis);
    if (s.outer == 1) {  // rank-major is already the concatenation along axis
      FERRITE_RETURN_IF_ERROR(c->all_gather(x.raw(), y->raw(), x.numel(), x.dtype())
                                  .with_context(ctx.node().describe()));
      continue;
    }
    FERRITE_ASSIGN_OR_RETURN(Tensor tmp, Tensor::create_uninitialized(x.dtype(), {g, x.numel()}));
    FERRITE_RETURN_IF_ERROR(c->all_gather(x.raw(), tmp.raw(), x.numel(), x.dtype())
                                .with_context(ctx.node().describe()));
    permute_blocks(static_cast<const uint8_t*>(tmp.raw()), static_cast<uint8_t*>(y->raw()), g,
                   s.outer, static_cast<size_t>(s.len * s.inner) * dtype_size(x.dtype()), true);
  }
  return Status::ok();
}

Status reduce_scatter_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(Communicator * c, communicator(ctx));
  FERRITE_RETURN_IF_ERROR(check_group(ctx, *c));
  const int64_t g = c->size();
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i);
    FERRITE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.node().attr_int("axis", 0),
                                                          static_cast<int64_t>(x.rank())));
    std::vector<int64_t> dims = x.dims();
    int64_t& d = dims[static_cast<size_t>(axis)];
    if (d % g != 0)
      return ctx.error("input ", i, " has ", d, " along axis ", axis, ", not a multiple of ", g);
    d /= g;
    FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output_uninitialized(i, x.dtype(), dims));
    const int64_t count = y->numel();
    AxisSplit s = split_at(x.dims(), axis);
    const void* send = x.raw();
    Tensor tmp;
    if (s.outer != 1) {  // make each rank's part contiguous: [outer][g][chunk] -> [g][outer][chunk]
      FERRITE_ASSIGN_OR_RETURN(tmp, Tensor::create_uninitialized(x.dtype(), {x.numel()}));
      permute_blocks(static_cast<const uint8_t*>(x.raw()), static_cast<uint8_t*>(tmp.raw()), g,
                     s.outer, static_cast<size_t>(s.len / g * s.inner) * dtype_size(x.dtype()),
                     false);
      send = tmp.raw();
    }
    FERRITE_RETURN_IF_ERROR(c->reduce_scatter_sum(send, y->raw(), count, x.dtype())
                                .with_context(ctx.node().describe()));
  }
  return Status::ok();
}

thread_local Communicator* t_bound = nullptr;

}  // namespace

Communicator* bound_communicator() {
  return t_bound;
}

BindCommunicator::BindCommunicator(Communicator* c) : previous_(t_bound) {
  t_bound = c;
}

BindCommunicator::~BindCommunicator() {
  t_bound = previous_;
}

void register_collective_ops(OpRegistry& r) {
  constexpr int kMany = 1 << 16;
  r.add(OpSchemaBuilder("AllReduce", kMicrosoft)
            .inputs(1, kMany)
            .outputs(1, kMany)
            .types("T", {0}, dtypes::kNumeric, false)
            .infer([](InferContext& ctx) -> Status {
              if (ctx.num_inputs() != ctx.num_outputs())
                return ctx.error("takes as many inputs as it has outputs");
              for (size_t i = 0; i < ctx.num_inputs(); ++i) ctx.set_output(i, ctx.input_type(i));
              return Status::ok();
            })
            .kernel(all_reduce_kernel)
            .not_foldable()
            .doc("sum of each input over the ranks of the tensor-parallel group"));
  r.add(OpSchemaBuilder("AllGather", kMicrosoft)
            .inputs(1, kMany)
            .outputs(1, kMany)
            .attr("group_size", AttrType::kInt, Attribute(int64_t{1}))
            .attr("axis", AttrType::kInt, Attribute(int64_t{0}))
            .types("T", {0}, dtypes::kNumeric | DTypeSet{DType::kBool}, false)
            .infer([](InferContext& ctx) { return infer_gather_scatter(ctx, true); })
            .kernel(all_gather_kernel)
            .not_foldable()
            .doc("the ranks' inputs concatenated along axis, in rank order"));
  r.add(OpSchemaBuilder("ReduceScatter", kMicrosoft)
            .inputs(1, kMany)
            .outputs(1, kMany)
            .attr("group_size", AttrType::kInt, Attribute(int64_t{1}))
            .attr("axis", AttrType::kInt, Attribute(int64_t{0}))
            .types("T", {0}, dtypes::kNumeric, false)
            .infer([](InferContext& ctx) { return infer_gather_scatter(ctx, false); })
            .kernel(reduce_scatter_kernel)
            .not_foldable()
            .doc("this rank's part (split along axis) of the sum over the ranks"));
}

}  // namespace ferrite
