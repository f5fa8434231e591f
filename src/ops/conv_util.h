// Sliding-window geometry shared by Conv, ConvTranspose and the pooling ops: reading and
// validating kernel/stride/dilation/pad attributes, resolving auto_pad, and output sizes both
// concrete (kernels) and symbolic (inference).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ops/helpers.h"
#include "ops/op_schema.h"

namespace ferrite {

// Bound on kernel/stride/dilation/pad attribute values, so that window arithmetic on them cannot
// overflow int64.
inline constexpr int64_t kMaxWindowAttr = int64_t{1} << 24;

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

struct Window {
  size_t rank = 0;  // number of spatial dims
  std::vector<int64_t> kernel, strides, dilations;
  std::vector<int64_t> pads;  // rank begins, then rank ends
  AutoPad auto_pad = AutoPad::kNotSet;
  bool ceil_mode = false;

  int64_t extent(size_t d) const { return (kernel[d] - 1) * dilations[d] + 1; }
  int64_t pad_begin(size_t d) const { return pads[d]; }
  int64_t pad_end(size_t d) const { return pads[rank + d]; }
  int64_t kernel_volume() const;  // only for kernels taken from a weight tensor
};

// Reads strides, dilations, pads, auto_pad and ceil_mode (those the node has; defaults
// otherwise) for `kernel`, and validates them. Errors name the node.
Expected<Window> read_window(const Node& node, std::vector<int64_t> kernel);

// The kernel_shape attribute if set (checked to have `rank` positive entries), else the
// static spatial dims of the weight shape `w` (dims 2..), else nullopt when they are unknown.
Expected<std::optional<std::vector<int64_t>>> conv_kernel_shape(const Node& node, size_t rank,
                                                                const Shape& w);

// Output spatial size of a forward window (Conv, pooling) over input size `in` along dim d.
// Symbolic when `in` is; unknown only where ceil_mode makes it data-size dependent. Fails when a
// static input is smaller than the window.
Expected<Dim> window_output_dim(const Node& node, const Window& w, size_t d, const Dim& in);

// Concrete version for kernels: returns the output spatial dims and rewrites w.pads for
// SAME_UPPER/SAME_LOWER/VALID so kernels can use pads directly. Fails if the input is smaller
// than the (padded) window.
Expected<std::vector<int64_t>> resolve_window(const Node& node, Window& w,
                                              const std::vector<int64_t>& in);

// The product of `dims` (1 for none).
int64_t product(const std::vector<int64_t>& dims);

// ONNX Conv's inference and reference kernel (conv.cpp); ferrite.FusedConv runs them for its
// convolution part (inputs X, W, B? and the Conv attributes).
Status infer_conv(InferContext& ctx);
// Output spatial dims of ConvTranspose for input spatial dims `in`; rewrites w.pads where
// auto_pad or output_shape decide them (those pads may be negative: the output then extends past
// the natural one).
Expected<std::vector<int64_t>> resolve_transpose(const Node& node, Window& w,
                                                 const std::vector<int64_t>& in);
// Conv's output shape for input shape x and weight shape w (the node's attributes; errors name it).
Expected<Shape> conv_output_shape(InferContext& ctx, const Shape& x, const Shape& w);
Status conv_kernel(KernelContext& ctx);
// Copies a 4-D tensor of any dtype from [N, C, H, W] to [N, H, W, C] (to_last) or back.
Expected<Tensor> permute_channels(const Tensor& t, bool to_last);
// conv_grad.cpp: ferrite.ConvGradWeight (the weight gradient of Conv), registered with Conv.
void register_conv_grad_ops(OpRegistry& r);
// Adds Conv's window attributes (auto_pad, dilations, group, kernel_shape, pads, strides).
OpSchemaBuilder& conv_attrs(OpSchemaBuilder& b);

}  // namespace ferrite
