// GXU's vendor library (SDK 1.1 library ops), internal to the plugin: the ops ferrite's
// fe_op_desc describes, seen through small helpers. The kernels run on the device's compute units
// over device memory (translated to the emulator's backing store), like any GXU launch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gxu.h"

namespace gxu::lib {

// Bytes per element of an FE_DTYPE_*, 0 for a type GXU's library does not move.
size_t element_size(fe_dtype t);

// One input or output of an op: in library_accepts dims may be -1 and data is null.
struct Operand {
  bool present = false;
  fe_dtype dtype = 0;
  std::vector<int64_t> dims;
  void* data = nullptr;             // host address of the device memory (library_run)
  const void* host_data = nullptr;  // the value on the host, for constants
  int64_t numel() const;
  bool known() const;  // every dim known (>= 0)
};

class Op {
 public:
  explicit Op(const fe_op_desc& d);
  std::string type;  // "MatMul", or "ferrite::FusedConv"
  std::vector<Operand> in, out;
  const fe_op_desc& desc;

  const fe_attr* attr(const char* name) const;
  int64_t attr_int(const char* name, int64_t def) const;
  float attr_float(const char* name, float def) const;
  std::string attr_string(const char* name, const std::string& def) const;
  std::vector<int64_t> attr_ints(const char* name) const;
  std::vector<float> attr_floats(const char* name) const;
  bool has(size_t i) const { return i < in.size() && in[i].present; }
};

// The epilogue activation of a fused op (ferrite.FusedMatMul / FusedConv attributes).
struct Activation {
  enum Kind {
    kNone,
    kRelu,
    kTanh,
    kSigmoid,
    kGelu,
    kGeluTanh,
    kLeakyRelu,
    kClip,
    kHardSigmoid,
    kHardSwish
  } kind = kNone;
  float a = 0, b = 0;
  float apply(float x) const;
};
// False for an activation GXU does not know.
bool parse_activation(const Op& op, Activation* act);

// An operand read broadcast (numpy rules, aligned right) over an output of `out` dims: the offset
// of output element (row r of the dims before the last, column j) is base(r) + j * last_stride.
class Broadcast {
 public:
  // False when `dims` does not broadcast to `out`.
  bool init(const std::vector<int64_t>& dims, const std::vector<int64_t>& out);
  int64_t base(int64_t r) const;
  int64_t last_stride() const { return out_.empty() ? 0 : strides_.back(); }

 private:
  std::vector<int64_t> out_, strides_;
};

// Linear algebra and convolution (gxu_blas.cpp). accepts_*: on shapes with possibly unknown dims;
// run_*: every operand translated, dims known.
bool accepts_matmul(const Op& op);
bool accepts_conv(const Op& op);
bool accepts_maxpool(const Op& op);
fe_status run_matmul(const Op& op);
fe_status run_conv(const Op& op);
fe_status run_maxpool(const Op& op);

// ferrite.Attention, f32 (gxu_attention.cpp).
bool accepts_attention(const Op& op);
fe_status run_attention(const Op& op);

// Broadcasting f32 Add, Sub, Mul, Div (gxu_library.cpp): for the nodes ferrite cannot fuse into
// generated kernels (a broadcast it cannot decide before the run).
bool accepts_binary(const Op& op);
fe_status run_binary(const Op& op);

}  // namespace gxu::lib
