#include "ops/conv_util.h"

#include <algorithm>
#include <cstring>

namespace ferrite {

int64_t Window::kernel_volume() const {
  return product(kernel);
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

Expected<Window> read_window(const Node& node, std::vector<int64_t> kernel) {
  Window w;
  w.rank = kernel.size();
  size_t n = w.rank;
  for (int64_t k : kernel)
    if (k <= 0 || k > kMaxWindowAttr)
      return err(node.describe(), ": kernel_shape entries must be in [1, ", kMaxWindowAttr, "]");
  w.kernel = std::move(kernel);
  w.strides = node.attr_ints("strides");
  if (w.strides.empty()) w.strides.assign(n, 1);
  w.dilations = node.attr_ints("dilations");
  if (w.dilations.empty()) w.dilations.assign(n, 1);
  w.pads = node.attr_ints("pads");
  if (w.pads.empty()) w.pads.assign(2 * n, 0);
  if (w.strides.size() != n)
    return err(node.describe(), ": strides has ", w.strides.size(), " entries, expected ", n);
  if (w.dilations.size() != n)
    return err(node.describe(), ": dilations has ", w.dilations.size(), " entries, expected ", n);
  if (w.pads.size() != 2 * n)
    return err(node.describe(), ": pads has ", w.pads.size(), " entries, expected ", 2 * n);
  for (size_t d = 0; d < n; ++d) {
    if (w.strides[d] <= 0 || w.strides[d] > kMaxWindowAttr)
      return err(node.describe(), ": strides must be in [1, ", kMaxWindowAttr, "]");
    if (w.dilations[d] <= 0 || w.dilations[d] > kMaxWindowAttr)
      return err(node.describe(), ": dilations must be in [1, ", kMaxWindowAttr, "]");
  }
  for (int64_t p : w.pads)
    if (p < 0 || p > kMaxWindowAttr)
      return err(node.describe(), ": pads must be in [0, ", kMaxWindowAttr, "]");
  std::string ap = node.attr_string("auto_pad", "NOTSET");
  if (ap == "NOTSET")
    w.auto_pad = AutoPad::kNotSet;
  else if (ap == "SAME_UPPER")
    w.auto_pad = AutoPad::kSameUpper;
  else if (ap == "SAME_LOWER")
    w.auto_pad = AutoPad::kSameLower;
  else if (ap == "VALID")
    w.auto_pad = AutoPad::kValid;
  else
    return err(node.describe(), ": unknown auto_pad '", ap, "'");
  if (w.auto_pad != AutoPad::kNotSet) w.pads.assign(2 * n, 0);
  w.ceil_mode = node.attr_int("ceil_mode", 0) != 0;
  return w;
}

Expected<std::optional<std::vector<int64_t>>> conv_kernel_shape(const Node& node, size_t rank,
                                                                const Shape& w) {
  std::vector<int64_t> k = node.attr_ints("kernel_shape");
  if (!k.empty()) {
    if (k.size() != rank)
      return err(node.describe(), ": kernel_shape has ", k.size(), " entries, expected ", rank);
    for (size_t d = 0; d < rank; ++d) {
      if (k[d] <= 0) return err(node.describe(), ": kernel_shape entries must be positive");
      auto wd = w.rank_known() && w.rank() == rank + 2 ? w[d + 2].value() : std::nullopt;
      if (wd && *wd != k[d])
        return err(node.describe(), ": kernel_shape ", dims_to_string(k), " does not match weight ",
                   w.to_string());
    }
    return std::optional<std::vector<int64_t>>(k);
  }
  if (!w.rank_known() || w.rank() != rank + 2) return std::optional<std::vector<int64_t>>();
  for (size_t d = 0; d < rank; ++d) {
    auto v = w[d + 2].value();
    if (!v) return std::optional<std::vector<int64_t>>();
    k.push_back(*v);
  }
  return std::optional<std::vector<int64_t>>(k);
}

Expected<Dim> window_output_dim(const Node& node, const Window& w, size_t d, const Dim& in) {
  if (auto v = in.value()) {
    // Static input: use exactly the kernels' computation.
    Window copy = w;
    std::vector<int64_t> in_dims(w.rank, 1);
    // Other dims do not matter; give them a size that always fits.
    for (size_t e = 0; e < w.rank; ++e) in_dims[e] = e == d ? *v : w.extent(e);
    FERRITE_ASSIGN_OR_RETURN(auto out, resolve_window(node, copy, in_dims));
    return Dim(out[d]);
  }
  int64_t s = w.strides[d];
  switch (w.auto_pad) {
    case AutoPad::kSameUpper:
    case AutoPad::kSameLower:
      return in.ceildiv(Dim(s));
    case AutoPad::kValid:
    case AutoPad::kNotSet: {
      int64_t pb = w.pad_begin(d), pe = w.pad_end(d), k = w.extent(d);
      Dim numer = in + Dim(pb + pe - k);
      if (!w.ceil_mode) return numer.floordiv(Dim(s)) + Dim(1);
      // The ceil-mode "last window must start inside the input or its begin padding" correction
      // can only trigger when pe + s > k.
      if (pe + s <= k) return numer.ceildiv(Dim(s)) + Dim(1);
      return Dim::unknown();
    }
  }
  return Dim::unknown();
}

Expected<std::vector<int64_t>> resolve_window(const Node& node, Window& w,
                                              const std::vector<int64_t>& in) {
  size_t n = w.rank;
  if (in.size() != n)
    return err(node.describe(), ": input has ", in.size(), " spatial dims, kernel has ", n);
  std::vector<int64_t> out(n);
  for (size_t d = 0; d < n; ++d) {
    int64_t s = w.strides[d], k = w.extent(d);
    if (w.auto_pad == AutoPad::kSameUpper || w.auto_pad == AutoPad::kSameLower) {
      out[d] = (in[d] + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (out[d] - 1) * s + k - in[d]);
      int64_t small = total / 2, big = total - small;
      w.pads[d] = w.auto_pad == AutoPad::kSameUpper ? small : big;
      w.pads[n + d] = w.auto_pad == AutoPad::kSameUpper ? big : small;
      continue;
    }
    if (w.auto_pad == AutoPad::kValid) w.pads[d] = w.pads[n + d] = 0;
    int64_t pb = w.pads[d], pe = w.pads[n + d];
    int64_t numer = in[d] + pb + pe - k;
    if (numer < 0)
      return err(node.describe(), ": spatial dim ", d, " of size ", in[d], " (padded ",
                 in[d] + pb + pe, ") is smaller than the window extent ", k);
    if (w.ceil_mode) {
      out[d] = (numer + s - 1) / s + 1;
      // A window that would start in the end padding is dropped (as PyTorch and ORT do).
      if ((out[d] - 1) * s >= in[d] + pb) --out[d];
    } else {
      out[d] = numer / s + 1;
    }
  }
  return out;
}

// Copies a 4-D tensor between [N, C, H, W] and [N, H, W, C] (to_last), any dtype.
Expected<Tensor> permute_channels(const Tensor& t, bool to_last) {
  const int64_t n = t.dim(0), a = t.dim(1), b = t.dim(2), c = t.dim(3);
  // to_last: [n, C=a, H=b, W=c] -> [n, H, W, C]; else [n, H=a, W=b, C=c] -> [n, C, H, W].
  std::vector<int64_t> dims = to_last ? std::vector<int64_t>{n, b, c, a}
                                      : std::vector<int64_t>{n, c, a, b};
  FERRITE_ASSIGN_OR_RETURN(Tensor out, Tensor::create_uninitialized(t.dtype(), dims));
  const size_t es = dtype_size(t.dtype());
  const auto* src = static_cast<const unsigned char*>(t.raw());
  auto* dst = static_cast<unsigned char*>(out.raw());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < a; ++p)
      for (int64_t q = 0; q < b; ++q)
        for (int64_t r = 0; r < c; ++r) {
          const int64_t from = ((i * a + p) * b + q) * c + r;
          // Element (p, q, r) of image i moves to (q, r, p) or (r, p, q).
          const int64_t to = to_last ? ((i * b + q) * c + r) * a + p : ((i * c + r) * a + p) * b + q;
          std::memcpy(dst + to * es, src + from * es, es);
        }
  return out;
}


}  // namespace ferrite
