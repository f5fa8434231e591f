// Col2Im (opset 18): the inverse of im2col. Columns [N, C * prod(block), L] are summed back into
// images [N, C, image...]; overlapping blocks add up.
#include "ops/conv_util.h"
#include "ops/elementwise_util.h"
#include "ops/helpers.h"
#include "ops/numeric_cast.h"

namespace ferrite {

namespace {

struct Col2ImGeometry {
  std::vector<int64_t> image, block, dil, stride, pad_begin, positions;
  int64_t block_size = 1, num_positions = 1;
};

// Validates the attributes against image and block shapes and computes the sliding positions.
template <class Ctx>
Expected<Col2ImGeometry> col2im_geometry(const Ctx& ctx, std::vector<int64_t> image,
                                         std::vector<int64_t> block) {
  const Node& n = ctx.node();
  const size_t r = image.size();
  if (r == 0 || block.size() != r)
    return ctx.error("image_shape and block_shape must have one length");
  Col2ImGeometry g;
  g.image = std::move(image);
  g.block = std::move(block);
  g.dil = n.attr_ints("dilations", std::vector<int64_t>(r, 1));
  g.stride = n.attr_ints("strides", std::vector<int64_t>(r, 1));
  std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * r, 0));
  if (g.dil.size() != r || g.stride.size() != r || pads.size() != 2 * r)
    return ctx.error("dilations, strides and pads must match the ", r, " spatial dims");
  for (size_t k = 0; k < r; ++k) {
    if (g.image[k] < 0 || g.block[k] < 1 || g.dil[k] < 1 || g.stride[k] < 1 || pads[k] < 0 ||
        pads[k + r] < 0)
      return ctx.error("image, block, dilation, stride and pads must be positive");
    // Bounded like Conv's window attributes, so that the geometry below cannot overflow.
    for (int64_t v : {g.image[k], g.block[k], g.dil[k], g.stride[k], pads[k], pads[k + r]})
      if (v > kMaxWindowAttr) return ctx.error("a Col2Im size exceeds ", kMaxWindowAttr);
    int64_t span = g.dil[k] * (g.block[k] - 1) + 1;
    int64_t padded = g.image[k] + pads[k] + pads[k + r];
    if (padded < span) return ctx.error("block does not fit the padded image along dim ", k);
    g.positions.push_back((padded - span) / g.stride[k] + 1);
    g.pad_begin.push_back(pads[k]);
    g.block_size *= g.block[k];
    g.num_positions *= g.positions.back();
  }
  return g;
}

std::optional<std::vector<int64_t>> constant_ints(const InferContext& ctx, size_t i) {
  auto v = ctx.input_dims_value(i);
  if (!v) return std::nullopt;
  std::vector<int64_t> out;
  for (const Dim& d : *v) {
    if (!d.is_static()) return std::nullopt;
    out.push_back(*d.value());
  }
  return out;
}

Status infer_col2im(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (x.rank_known() && x.rank() != 3) return ctx.error("input must be [N, C * prod(block), L]");
  auto image = constant_ints(ctx, 1);
  auto block = constant_ints(ctx, 2);
  if (!image || !block || !x.rank_known()) {
    ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
    return Status::ok();
  }
  FERRITE_ASSIGN_OR_RETURN(Col2ImGeometry g, col2im_geometry(ctx, *image, *block));
  const Dim& cb = x.dims()[1];
  const Dim& l = x.dims()[2];
  if (cb.is_static() && *cb.value() % g.block_size != 0)
    return ctx.error("input dim 1 (", *cb.value(), ") is not a multiple of the block size ",
                     g.block_size);
  if (l.is_static() && *l.value() != g.num_positions)
    return ctx.error("input dim 2 is ", *l.value(), ", the geometry gives ", g.num_positions,
                     " blocks");
  std::vector<Dim> out = {x.dims()[0],
                          cb.is_static() ? Dim(*cb.value() / g.block_size) : Dim::unknown()};
  for (int64_t d : g.image) out.emplace_back(d);
  ctx.set_output(0, ctx.input_dtype(0), Shape(std::move(out)));
  return Status::ok();
}

std::vector<int64_t> read_ints(const Tensor& t) {
  std::vector<int64_t> v;
  visit_dtype(t.dtype(), [&]<class T>() {
    for (int64_t i = 0; i < t.numel(); ++i)
      v.push_back(static_cast<int64_t>(to_double(t.data<T>()[i])));
  });
  return v;
}

Status col2im_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 3) return ctx.error("input must be [N, C * prod(block), L]");
  FERRITE_ASSIGN_OR_RETURN(Col2ImGeometry g,
                           col2im_geometry(ctx, read_ints(ctx.input(1)), read_ints(ctx.input(2))));
  const int64_t batch = x.dims()[0];
  if (x.dims()[1] % g.block_size != 0 || x.dims()[2] != g.num_positions)
    return ctx.error("input ", x.type_string(), " does not match the block geometry");
  const int64_t channels = x.dims()[1] / g.block_size;
  std::vector<int64_t> out = {batch, channels};
  int64_t image_size = 1;
  for (int64_t d : g.image) {
    out.push_back(d);
    image_size *= d;
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out));
  const size_t r = g.image.size();
  return dispatch_dtype<TypeClass::kFloat>(ctx, x.dtype(), [&]<class T>() -> Status {
    using C = compute_t<T>;
    const T* px = x.data<T>();
    T* py = y->data<T>();
    std::vector<C> acc(static_cast<size_t>(image_size));
    std::vector<int64_t> b_idx(r), p_idx(r);
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        std::fill(acc.begin(), acc.end(), C(0));
        for (int64_t b = 0; b < g.block_size; ++b) {
          for (int64_t rest = b, k = static_cast<int64_t>(r) - 1; k >= 0; --k) {
            b_idx[k] = rest % g.block[k];
            rest /= g.block[k];
          }
          const T* col = px + ((n * channels + c) * g.block_size + b) * g.num_positions;
          for (int64_t p = 0; p < g.num_positions; ++p) {
            int64_t off = 0;
            bool inside = true;
            for (int64_t rest = p, k = static_cast<int64_t>(r) - 1; k >= 0; --k) {
              p_idx[k] = rest % g.positions[k];
              rest /= g.positions[k];
            }
            for (size_t k = 0; k < r && inside; ++k) {
              int64_t i = p_idx[k] * g.stride[k] - g.pad_begin[k] + b_idx[k] * g.dil[k];
              inside = i >= 0 && i < g.image[k];
              off = off * g.image[k] + i;
            }
            if (inside) acc[static_cast<size_t>(off)] += convert<C>(col[p]);
          }
        }
        T* img = py + (n * channels + c) * image_size;
        for (int64_t i = 0; i < image_size; ++i) img[i] = convert<T>(acc[static_cast<size_t>(i)]);
      }
    }
    return Status::ok();
  });
}

}  // namespace

void register_col2im_ops(OpRegistry& r) {
  r.add(OpSchemaBuilder("Col2Im")
            .versions(18)
            .inputs(3)
            .outputs(1)
            .optional_attr("dilations", AttrType::kInts)
            .optional_attr("pads", AttrType::kInts)
            .optional_attr("strides", AttrType::kInts)
            .types("T", {0}, dtypes::kFloat)
            .types("tensor(int64)", {1, 2}, {DType::kI64})
            .infer(infer_col2im)
            .kernel(col2im_kernel));
}

}  // namespace ferrite
