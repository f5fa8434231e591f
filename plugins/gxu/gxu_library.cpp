// GXU's library ops (SDK 1.1): what the spec lists, the per-node accept decision, the dispatch,
// the data-movement kernels (Gather, Split, Concat) and broadcasting f32 arithmetic. GEMM,
// convolution and pooling are in gxu_blas.cpp.
#include "gxu_library.h"

#include <cmath>
#include <cstring>

namespace gxu {

const char* const kLibraryOps[] = {"MatMul",
                                   "Gemm",
                                   "ferrite::FusedMatMul",
                                   "Conv",
                                   "ferrite::FusedConv",
                                   "MaxPool",
                                   "Gather",
                                   "Split",
                                   "Concat",
                                   "Add",
                                   "Sub",
                                   "Mul",
                                   "Div",
                                   "ferrite::Attention"};
const int32_t kLibraryOpCount = static_cast<int32_t>(sizeof kLibraryOps / sizeof kLibraryOps[0]);

namespace lib {

size_t element_size(fe_dtype t) {
  switch (t) {
    case FE_DTYPE_U8:
    case FE_DTYPE_I8:
    case FE_DTYPE_BOOL:
      return 1;
    case FE_DTYPE_U16:
    case FE_DTYPE_I16:
    case FE_DTYPE_F16:
    case FE_DTYPE_BF16:
      return 2;
    case FE_DTYPE_F32:
    case FE_DTYPE_I32:
    case FE_DTYPE_U32:
      return 4;
    case FE_DTYPE_F64:
    case FE_DTYPE_I64:
    case FE_DTYPE_U64:
      return 8;
    default:
      return 0;
  }
}

int64_t Operand::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

bool Operand::known() const {
  for (int64_t d : dims)
    if (d < 0) return false;
  return true;
}

namespace {

Operand operand(const fe_tensor_desc& t) {
  Operand o;
  o.present = t.rank >= 0;
  if (!o.present) return o;
  o.dtype = t.dtype;
  o.dims.assign(t.dims, t.dims + t.rank);
  o.data = t.data;
  o.host_data = t.host_data;
  return o;
}

}  // namespace

Op::Op(const fe_op_desc& d) : desc(d) {
  std::string domain = d.domain ? d.domain : "";
  type = (domain.empty() ? "" : domain + "::") + (d.op_type ? d.op_type : "");
  for (int32_t i = 0; i < d.num_inputs; ++i) in.push_back(operand(d.inputs[i]));
  for (int32_t i = 0; i < d.num_outputs; ++i) out.push_back(operand(d.outputs[i]));
}

const fe_attr* Op::attr(const char* name) const {
  for (int32_t i = 0; i < desc.num_attrs; ++i)
    if (desc.attrs[i].name && std::strcmp(desc.attrs[i].name, name) == 0) return &desc.attrs[i];
  return nullptr;
}

int64_t Op::attr_int(const char* name, int64_t def) const {
  const fe_attr* a = attr(name);
  return a && a->kind == FE_ATTR_INT ? a->i : def;
}

float Op::attr_float(const char* name, float def) const {
  const fe_attr* a = attr(name);
  return a && a->kind == FE_ATTR_FLOAT ? static_cast<float>(a->f) : def;
}

std::string Op::attr_string(const char* name, const std::string& def) const {
  const fe_attr* a = attr(name);
  return a && a->kind == FE_ATTR_STRING && a->s ? a->s : def;
}

std::vector<int64_t> Op::attr_ints(const char* name) const {
  const fe_attr* a = attr(name);
  if (!a || a->kind != FE_ATTR_INTS || !a->ints) return {};
  return std::vector<int64_t>(a->ints, a->ints + a->count);
}

std::vector<float> Op::attr_floats(const char* name) const {
  const fe_attr* a = attr(name);
  std::vector<float> v;
  if (a && a->kind == FE_ATTR_FLOATS && a->floats)
    for (int32_t i = 0; i < a->count; ++i) v.push_back(static_cast<float>(a->floats[i]));
  return v;
}

// The ONNX op of the same name, in float (what ferrite's reference kernels compute for f32).
float Activation::apply(float x) const {
  switch (kind) {
    case kNone:
      return x;
    case kRelu:
      return x < 0 ? 0.f : x;
    case kTanh:
      return std::tanh(x);
    case kSigmoid:
      return 1.f / (1.f + std::exp(-x));
    case kGelu:
      return 0.5f * x * (1.f + std::erf(x / std::sqrt(2.f)));
    case kGeluTanh:
      return 0.5f * x *
             (1.f +
              std::tanh(std::sqrt(2.f / static_cast<float>(M_PI)) * (x + 0.044715f * x * x * x)));
    case kLeakyRelu:
      return x < 0 ? a * x : x;
    case kClip:
      return x < a ? a : (x > b ? b : x);
    case kHardSigmoid:
      return std::max(0.f, std::min(1.f, a * x + b));
    case kHardSwish:
      return x * std::max(0.f, std::min(1.f, x / 6.f + 0.5f));
  }
  return x;
}

bool parse_activation(const Op& op, Activation* act) {
  const std::string name = op.attr_string("activation", "none");
  const std::vector<float> p = op.attr_floats("activation_params");
  struct Entry {
    const char* name;
    Activation::Kind kind;
    size_t params;
  };
  static const Entry kinds[] = {{"none", Activation::kNone, 0},
                                {"relu", Activation::kRelu, 0},
                                {"tanh", Activation::kTanh, 0},
                                {"sigmoid", Activation::kSigmoid, 0},
                                {"gelu", Activation::kGelu, 0},
                                {"gelu_tanh", Activation::kGeluTanh, 0},
                                {"hard_swish", Activation::kHardSwish, 0},
                                {"leaky_relu", Activation::kLeakyRelu, 1},
                                {"clip", Activation::kClip, 2},
                                {"hard_sigmoid", Activation::kHardSigmoid, 2}};
  for (const Entry& e : kinds)
    if (name == e.name) {
      if (p.size() != e.params) return false;
      act->kind = e.kind;
      act->a = e.params > 0 ? p[0] : 0.f;
      act->b = e.params > 1 ? p[1] : 0.f;
      return true;
    }
  return false;
}

bool Broadcast::init(const std::vector<int64_t>& dims, const std::vector<int64_t>& out) {
  if (dims.size() > out.size()) return false;
  out_ = out;
  strides_.assign(out.size(), 0);
  int64_t s = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    const size_t o = out.size() - dims.size() + k;
    if (dims[k] != out[o] && dims[k] != 1) return false;
    strides_[o] = dims[k] == 1 ? 0 : s;
    s *= dims[k];
  }
  return true;
}

int64_t Broadcast::base(int64_t r) const {
  if (out_.empty()) return 0;
  int64_t off = 0;
  for (size_t d = out_.size() - 1; d-- > 0;) {
    off += (r % out_[d]) * strides_[d];
    r /= out_[d];
  }
  return off;
}

bool accepts_binary(const Op& op) {
  if (op.in.size() != 2 || !op.has(0) || !op.has(1) || op.out.size() != 1) return false;
  return op.in[0].dtype == FE_DTYPE_F32 && op.in[1].dtype == FE_DTYPE_F32 &&
         op.out[0].dtype == FE_DTYPE_F32;
}

fe_status run_binary(const Op& op) {
  const std::vector<int64_t>& out = op.out[0].dims;
  Broadcast a, b;
  if (!a.init(op.in[0].dims, out) || !b.init(op.in[1].dims, out))
    return fail(kInvalidValue, "gxu" + op.type + ": the inputs do not broadcast to the output");
  const int64_t cols = out.empty() ? 1 : out.back();
  const int64_t rows = cols == 0 ? 0 : op.out[0].numel() / cols;
  const auto* pa = static_cast<const float*>(op.in[0].data);
  const auto* pb = static_cast<const float*>(op.in[1].data);
  auto* py = static_cast<float*>(op.out[0].data);
  const int kind = op.type == "Add" ? 0 : op.type == "Sub" ? 1 : op.type == "Mul" ? 2 : 3;
  const int64_t as = a.last_stride(), bs = b.last_stride();
  run_on_units(rows, [&](int64_t r) {
    const float* x = pa + a.base(r);
    const float* y = pb + b.base(r);
    float* o = py + r * cols;
    for (int64_t j = 0; j < cols; ++j) {
      const float u = x[j * as], v = y[j * bs];
      o[j] = kind == 0 ? u + v : kind == 1 ? u - v : kind == 2 ? u * v : u / v;
    }
  });
  return kSuccess;
}

namespace {

int64_t normalized_axis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

int64_t product(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < d.size(); ++i) n *= d[i];
  return n;
}

// --- data movement: bytes only, any element type ----------------------------------------------

bool accepts_gather(const Op& op) {
  if (op.in.size() != 2 || !op.has(0) || !op.has(1) || op.out.size() != 1) return false;
  if (op.in[1].dtype != FE_DTYPE_I32 && op.in[1].dtype != FE_DTYPE_I64) return false;
  int64_t axis = normalized_axis(op.attr_int("axis", 0), op.in[0].dims.size());
  return element_size(op.in[0].dtype) > 0 && axis >= 0 &&
         axis < static_cast<int64_t>(op.in[0].dims.size());
}

fe_status run_gather(const Op& op) {
  const Operand &data = op.in[0], &idx = op.in[1];
  const size_t es = element_size(data.dtype);
  const size_t axis =
      static_cast<size_t>(normalized_axis(op.attr_int("axis", 0), data.dims.size()));
  const int64_t outer = product(data.dims, 0, axis), extent = data.dims[axis];
  const int64_t inner = product(data.dims, axis + 1, data.dims.size());
  const int64_t n = idx.numel();
  std::vector<int64_t> ix(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = idx.dtype == FE_DTYPE_I64 ? static_cast<const int64_t*>(idx.data)[i]
                                          : static_cast<const int32_t*>(idx.data)[i];
    if (v < -extent || v >= extent)
      return fail(kInvalidValue, "gxuGather: index " + std::to_string(v) +
                                     " is out of range for an axis of " + std::to_string(extent));
    ix[static_cast<size_t>(i)] = v < 0 ? v + extent : v;
  }
  const auto* src = static_cast<const uint8_t*>(data.data);
  auto* dst = static_cast<uint8_t*>(op.out[0].data);
  const size_t row = static_cast<size_t>(inner) * es;
  run_on_units(outer, [&](int64_t o) {
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(dst + (o * n + i) * row, src + (o * extent + ix[static_cast<size_t>(i)]) * row,
                  row);
  });
  return kSuccess;
}

bool same_type_outputs(const Op& op, fe_dtype t) {
  for (const Operand& o : op.out)
    if (!o.present || o.dtype != t) return false;
  return true;
}

bool accepts_split(const Op& op) {
  if (!op.has(0) || op.out.empty() || !same_type_outputs(op, op.in[0].dtype)) return false;
  int64_t axis = normalized_axis(op.attr_int("axis", 0), op.in[0].dims.size());
  return element_size(op.in[0].dtype) > 0 && axis >= 0 &&
         axis < static_cast<int64_t>(op.in[0].dims.size());
}

// Split and Concat: slabs of [outer, part extent * inner] laid side by side along the axis.
void copy_slabs(const uint8_t* src, int64_t src_row, uint8_t* dst, int64_t dst_row, int64_t outer,
                int64_t bytes) {
  if (bytes == 0) return;
  run_on_units(outer, [&](int64_t o) { std::memcpy(dst + o * dst_row, src + o * src_row, bytes); });
}

fe_status run_split(const Op& op) {
  const Operand& x = op.in[0];
  const size_t es = element_size(x.dtype);
  const size_t axis = static_cast<size_t>(normalized_axis(op.attr_int("axis", 0), x.dims.size()));
  const int64_t outer = product(x.dims, 0, axis);
  const int64_t row = product(x.dims, axis, x.dims.size()) * static_cast<int64_t>(es);
  int64_t offset = 0, total = 0;
  for (const Operand& o : op.out) total += o.dims[axis];
  if (total != x.dims[axis])
    return fail(kInvalidValue, "gxuSplit: the outputs do not add up to the input's axis");
  for (const Operand& o : op.out) {
    const int64_t part = product(o.dims, axis, o.dims.size()) * static_cast<int64_t>(es);
    if (outer * part > 0)
      copy_slabs(static_cast<const uint8_t*>(x.data) + offset, row, static_cast<uint8_t*>(o.data),
                 part, outer, part);
    offset += part;
  }
  return kSuccess;
}

bool accepts_concat(const Op& op) {
  if (op.out.size() != 1 || op.in.empty()) return false;
  for (const Operand& i : op.in)
    if (!i.present || i.dtype != op.out[0].dtype) return false;
  int64_t axis = normalized_axis(op.attr_int("axis", 0), op.out[0].dims.size());
  return element_size(op.out[0].dtype) > 0 && axis >= 0 &&
         axis < static_cast<int64_t>(op.out[0].dims.size());
}

fe_status run_concat(const Op& op) {
  const Operand& y = op.out[0];
  const size_t es = element_size(y.dtype);
  const size_t axis = static_cast<size_t>(normalized_axis(op.attr_int("axis", 0), y.dims.size()));
  const int64_t outer = product(y.dims, 0, axis);
  const int64_t row = product(y.dims, axis, y.dims.size()) * static_cast<int64_t>(es);
  int64_t offset = 0;
  for (const Operand& i : op.in) {
    if (i.dims.size() != y.dims.size())
      return fail(kInvalidValue, "gxuConcat: inputs of different ranks");
    const int64_t part = product(i.dims, axis, i.dims.size()) * static_cast<int64_t>(es);
    if (outer * part > 0)
      copy_slabs(static_cast<const uint8_t*>(i.data), part, static_cast<uint8_t*>(y.data) + offset,
                 row, outer, part);
    offset += part;
  }
  if (offset != row) return fail(kInvalidValue, "gxuConcat: the inputs do not fill the output");
  return kSuccess;
}

bool accepts(const Op& op) {
  if (op.type == "MatMul" || op.type == "Gemm" || op.type == "ferrite::FusedMatMul")
    return accepts_matmul(op);
  if (op.type == "Conv" || op.type == "ferrite::FusedConv") return accepts_conv(op);
  if (op.type == "MaxPool") return accepts_maxpool(op);
  if (op.type == "Gather") return accepts_gather(op);
  if (op.type == "Split") return accepts_split(op);
  if (op.type == "Concat") return accepts_concat(op);
  if (op.type == "Add" || op.type == "Sub" || op.type == "Mul" || op.type == "Div")
    return accepts_binary(op);
  if (op.type == "ferrite::Attention") return accepts_attention(op);
  return false;
}

// Device addresses to the emulator's backing store; every operand checked against its allocation.
fe_status translate_all(Op& op) {
  for (auto* list : {&op.in, &op.out})
    for (Operand& o : *list) {
      if (!o.present) continue;
      if (!o.known()) return fail(kInvalidValue, "gxu library: an operand has unknown dims");
      const size_t bytes = static_cast<size_t>(o.numel()) * element_size(o.dtype);
      if (bytes == 0) {
        o.data = nullptr;
        continue;
      }
      void* host = translate(o.data, bytes);
      if (!host) return kInvalidDevicePointer;  // translate() set the message
      o.data = host;
    }
  return kSuccess;
}

}  // namespace
}  // namespace lib

fe_status library_accepts(const fe_op_desc* desc, int32_t* accepted) {
  if (!desc || !accepted) return fail(kInvalidValue, "gxuLibraryAccepts: null argument");
  *accepted = lib::accepts(lib::Op(*desc)) ? 1 : 0;
  return kSuccess;
}

fe_status library_run(const fe_op_desc* desc, fe_stream stream) {
  if (!desc) return fail(kInvalidValue, "gxuLibraryRun: null argument");
  if (stream != 0) return fail(kInvalidValue, "gxuLibraryRun: unknown stream");
  lib::Op op(*desc);
  if (!lib::accepts(op))
    return fail(kNotImplemented,
                "gxuLibraryRun: " + op.type + " is not supported for these operands");
  if (fe_status st = lib::translate_all(op); st != kSuccess) return st;
  if (op.type == "MatMul" || op.type == "Gemm" || op.type == "ferrite::FusedMatMul")
    return lib::run_matmul(op);
  if (op.type == "Conv" || op.type == "ferrite::FusedConv") return lib::run_conv(op);
  if (op.type == "MaxPool") return lib::run_maxpool(op);
  if (op.type == "Gather") return lib::run_gather(op);
  if (op.type == "Split") return lib::run_split(op);
  if (op.type == "Concat") return lib::run_concat(op);
  if (op.type == "ferrite::Attention") return lib::run_attention(op);
  return lib::run_binary(op);
}

}  // namespace gxu
