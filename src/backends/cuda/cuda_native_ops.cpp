#include "backends/cuda/cuda_native_ops.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backends/cuda/cuda_nccl.h"
#include "ops/attention_layout.h"
#include "ops/conv_util.h"

namespace ferrite::cuda {

int64_t prod(const std::vector<int64_t>& v, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < std::min(e, v.size()); ++i) p *= v[i];
  return p;
}

DType gemm_dtype(const NativeIO& io) {
  DType t = DType::kUndefined;
  for (const auto& v : io.in) {
    if (!v) continue;
    if (t != DType::kUndefined && v->dtype != t) return DType::kUndefined;
    t = v->dtype;
  }
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16 ? t : DType::kUndefined;
}

std::optional<std::vector<int64_t>> broadcast(std::vector<int64_t> a, std::vector<int64_t> b) {
  if (a.size() < b.size()) std::swap(a, b);
  std::vector<int64_t> out = a;
  size_t off = a.size() - b.size();
  for (size_t i = 0; i < b.size(); ++i) {
    int64_t x = a[off + i], y = b[i];
    if (x == y || y == 1) continue;
    if (x == 1)
      out[off + i] = y;
    else
      return std::nullopt;
  }
  return out;
}

namespace {

// Same batch layout once leading 1s are ignored.
bool same_batch(const std::vector<int64_t>& a, const std::vector<int64_t>& out) {
  return prod(a) == prod(out) && broadcast(a, out) == out;
}

// Batched row-major matmul C[batch, M, N] = A[batchA, M, K] * op(B)[batchB, K, N] with NumPy
// batch broadcasting; picks one (batched) cuBLASLt call where the layouts allow it.
Status matmul(CudaBackend& be, const void* a, const std::vector<int64_t>& ab, const void* b,
              const std::vector<int64_t>& bb, const std::vector<int64_t>& batch, int64_t M,
              int64_t N, int64_t K, bool trans_b, void* c, GemmCall base) {
  base.k = K;
  base.n = N;
  base.a = a;
  base.lda = K;
  base.b = b;
  base.trans_b = trans_b;
  base.ldb = trans_b ? K : N;
  base.c = c;
  base.ldc = N;
  const int64_t nb = prod(batch);
  if (prod(bb) == 1) {
    base.m = nb * M;  // B shared: fold A's batch into M
    return be.gemm->run(base);
  }
  if (same_batch(bb, batch) && (prod(ab) == 1 || same_batch(ab, batch))) {
    base.m = M;
    base.batch = nb;
    base.stride_a = prod(ab) == 1 ? 0 : M * K;
    base.stride_b = K * N;
    base.stride_c = M * N;
    if (base.c_in) base.c_in = base.c_in;  // same layout as c
    return be.gemm->run(base);
  }
  // General broadcast: one call per output matrix.
  BroadcastDims da{}, db{};
  if (!broadcast_strides(ab, batch, &da) || !broadcast_strides(bb, batch, &db))
    return err("cuda: matmul batch dims do not broadcast");
  base.m = M;
  for (int64_t i = 0; i < nb; ++i) {
    int64_t r = i, oa = 0, ob = 0;
    for (int d = kMaxRank - 1; d >= 0; --d) {
      oa += (r % da.dims[d]) * da.strides[d];
      ob += (r % db.dims[d]) * db.strides[d];
      r /= da.dims[d];
    }
    GemmCall g = base;
    g.a = elem_offset(a, oa * M * K, base.dtype);
    g.b = elem_offset(b, ob * K * N, base.dtype);
    g.c = elem_offset(c, i * M * N, base.dtype);
    if (base.c_in) g.c_in = elem_offset(base.c_in, i * M * N, base.dtype);
    FERRITE_RETURN_IF_ERROR(be.gemm->run(g));
  }
  return Status::ok();
}

Expected<bool> run_matmul(const Node& node, NativeIO& io, CudaBackend& be) {
  const DType dt = gemm_dtype(io);
  if (dt == DType::kUndefined || !io.in[0] || !io.in[1]) return false;
  std::vector<int64_t> ad = io.in[0]->dims, bd = io.in[1]->dims;
  if (ad.empty() || bd.empty()) return false;
  const bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  if (a1) ad.insert(ad.begin(), 1);
  if (b1) bd.push_back(1);
  int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
  if (bd[bd.size() - 2] != K) return false;
  std::vector<int64_t> ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  auto batch = broadcast(ab, bb);
  if (!batch || batch->size() + 2 > kMaxRank) return false;
  std::vector<int64_t> out = *batch;
  if (!a1) out.push_back(M);
  if (!b1) out.push_back(N);
  FERRITE_ASSIGN_OR_RETURN(void* y, io.output(0, dt, out));
  GemmCall g;
  g.dtype = dt;
  g.tf32 = io.tf32;
  FERRITE_RETURN_IF_ERROR(
      matmul(be, io.in[0]->ptr, ab, io.in[1]->ptr, bb, *batch, M, N, K, false, y, g));
  return true;
}

Expected<bool> run_fused_matmul(const Node& node, NativeIO& io, CudaBackend& be) {
  const DType dt = gemm_dtype(io);
  if (dt == DType::kUndefined || !io.in[0] || !io.in[1]) return false;
  // Any activation of the scalar-function table: in cuBLASLt's epilogue where the row names
  // one, else in the library's epilogue kernel (fe_act, spelled from the table).
  auto act_or = activation_of(node);
  if (!act_or) return false;
  const Activation act = *act_or;
  const bool tb = node.attr_int("transB") != 0;
  const std::vector<int64_t>& ad = io.in[0]->dims;
  const std::vector<int64_t>& bd = io.in[1]->dims;
  if (ad.size() < 2 || bd.size() < 2) return false;
  int64_t M = ad[ad.size() - 2], K = ad.back();
  int64_t N = tb ? bd[bd.size() - 2] : bd.back();
  if ((tb ? bd.back() : bd[bd.size() - 2]) != K) return false;
  std::vector<int64_t> ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  auto batch = broadcast(ab, bb);
  if (!batch || batch->size() + 2 > kMaxRank) return false;
  std::vector<int64_t> out = *batch;
  out.push_back(M);
  out.push_back(N);
  const DevView* bias = io.in.size() > 2 && io.in[2] ? &*io.in[2] : nullptr;
  const DevView* res = io.in.size() > 3 && io.in[3] ? &*io.in[3] : nullptr;
  if (bias && prod(bias->dims) != N) return false;
  BroadcastDims rb{};
  if (res && !broadcast_strides(res->dims, out, &rb)) return false;
  FERRITE_ASSIGN_OR_RETURN(void* y, io.output(0, dt, out));
  GemmCall g;
  g.dtype = dt;
  g.tf32 = io.tf32;
  g.bias = bias ? bias->ptr : nullptr;
  // cuBLASLt applies its epilogue activation before rounding the product, where the unfused ops
  // round it first: its GELU (GPT-2's MLP, the tanh approximation) is taken for 16-bit outputs,
  // whose rounding is far coarser than the difference; f32 keeps the library's epilogue kernel.
  // In the GEMM it costs nothing: as a pass of its own it took 12 us of GPT-2's 90 us per layer
  // (8x128 tokens, bf16, H100).
  const CublasLtEpilogue lt = act.none() ? CublasLtEpilogue::kNone : act.fn->cublaslt;
  const bool in_gemm = act.none() || lt == CublasLtEpilogue::kRelu ||
                       (lt == CublasLtEpilogue::kGeluTanh && dt != DType::kF32);
  g.act = in_gemm ? lt : CublasLtEpilogue::kNone;
  bool res_done = false;
  if (res && act.none() && res->dims == out) {
    g.c_in = res->ptr;  // y = A B + residual + bias in the GEMM itself
    g.beta = 1;
    res_done = true;
  }
  FERRITE_RETURN_IF_ERROR(
      matmul(be, io.in[0]->ptr, ab, io.in[1]->ptr, bb, *batch, M, N, K, tb, y, g));
  if (!in_gemm || (res && !res_done))
    FERRITE_RETURN_IF_ERROR(be.lib->epilogue(y, nullptr, res && !res_done ? res->ptr : nullptr, &rb,
                                             prod(out) / N, N, in_gemm ? Activation{} : act, dt,
                                             res && res->dims == out));
  return true;
}

Expected<bool> run_gemm(const Node& node, NativeIO& io, CudaBackend& be) {
  const DType dt = gemm_dtype(io);
  if (dt == DType::kUndefined || !io.in[0] || !io.in[1]) return false;
  const auto& ad = io.in[0]->dims;
  const auto& bd = io.in[1]->dims;
  if (ad.size() != 2 || bd.size() != 2) return false;
  const bool ta = node.attr_int("transA") != 0, tb = node.attr_int("transB") != 0;
  const float alpha = node.attr_float("alpha", 1.0f), beta = node.attr_float("beta", 1.0f);
  int64_t M = ta ? ad[1] : ad[0], K = ta ? ad[0] : ad[1];
  int64_t N = tb ? bd[0] : bd[1];
  if ((tb ? bd[1] : bd[0]) != K) return false;
  const DevView* c = io.in.size() > 2 && io.in[2] ? &*io.in[2] : nullptr;
  BroadcastDims cb{};
  if (c && !broadcast_strides(c->dims, {M, N}, &cb)) return false;
  FERRITE_ASSIGN_OR_RETURN(void* y, io.output(0, dt, {M, N}));
  GemmCall g;
  g.dtype = dt;
  g.tf32 = io.tf32;
  g.m = M;
  g.n = N;
  g.k = K;
  g.a = io.in[0]->ptr;
  g.lda = ad[1];
  g.trans_a = ta;
  g.b = io.in[1]->ptr;
  g.ldb = bd[1];
  g.trans_b = tb;
  g.c = y;
  g.ldc = N;
  g.alpha = alpha;
  if (c && beta != 0) {
    if (beta == 1 && prod(c->dims) == N && c->dims.back() == N) {
      g.bias = c->ptr;
    } else {
      FERRITE_RETURN_IF_ERROR(be.lib->broadcast_fill(y, c->ptr, cb, M * N, beta, dt));
      g.c_in = y;
      g.beta = 1;
    }
  }
  FERRITE_RETURN_IF_ERROR(be.gemm->run(g));
  return true;
}

// Split along an axis: one strided device-to-device copy per output.
Expected<bool> run_split(const Node& node, NativeIO& io, CudaBackend& be) {
  if (!io.in[0]) return false;
  const auto& xd = io.in[0]->dims;
  int64_t axis = node.attr_int("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(xd.size());
  if (axis < 0 || axis >= static_cast<int64_t>(xd.size())) return false;
  const int64_t len = xd[axis];
  const size_t nout = node.outputs.size();
  std::vector<int64_t> sizes;
  if (io.in.size() > 1 && io.in[1]) {
    if (!io.in[1]->host || io.in[1]->host->dtype() != DType::kI64) return false;
    sizes = io.in[1]->host->to_int_vector();
  } else if (node.has_attr("split")) {
    sizes = node.attr_ints("split");
  } else {
    int64_t n =
        node.has_attr("num_outputs") ? node.attr_int("num_outputs") : static_cast<int64_t>(nout);
    if (n <= 0) return false;
    int64_t chunk = (len + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, len - i * chunk)));
  }
  if (sizes.size() != nout) return false;
  int64_t sum = 0;
  for (int64_t v : sizes) {
    if (v < 0) return false;
    sum += v;
  }
  if (sum != len) return false;
  const size_t esize = dtype_size(io.in[0]->dtype);
  const int64_t outer = prod(xd, 0, axis), inner = prod(xd, axis + 1) * static_cast<int64_t>(esize);
  // Each present output once; then rows of whole 16-byte units take one kernel for all outputs
  // (when every output is present), else one 2-D copy per output.
  std::vector<void*> dst(nout, nullptr);
  bool vector = reinterpret_cast<uintptr_t>(io.in[0]->ptr) % 16 == 0 && outer > 0;
  for (size_t j = 0; j < nout; ++j) {
    if (!node.output(j)) {
      vector = false;
      continue;
    }
    std::vector<int64_t> od = xd;
    od[axis] = sizes[j];
    FERRITE_ASSIGN_OR_RETURN(dst[j], io.output(j, io.in[0]->dtype, od));
    vector =
        vector && (sizes[j] * inner) % 16 == 0 && reinterpret_cast<uintptr_t>(dst[j]) % 16 == 0;
  }
  if (vector) {
    std::vector<int64_t> widths;
    for (size_t j = 0; j < nout; ++j) widths.push_back(sizes[j] * inner / 16);
    FERRITE_RETURN_IF_ERROR(be.lib->split16(io.in[0]->ptr, dst, widths, outer));
    return true;
  }
  int64_t off = 0;
  for (size_t j = 0; j < nout; ++j) {
    if (dst[j] && sizes[j] > 0 && outer > 0 && inner > 0) {
      CUDA_MEMCPY2D c{};
      c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
      c.srcDevice = dptr(io.in[0]->ptr);
      c.srcXInBytes = static_cast<size_t>(off * inner);
      c.srcPitch = static_cast<size_t>(len * inner);
      c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
      c.dstDevice = dptr(dst[j]);
      c.dstPitch = static_cast<size_t>(sizes[j] * inner);
      c.WidthInBytes = static_cast<size_t>(sizes[j] * inner);
      c.Height = static_cast<size_t>(outer);
      FERRITE_RETURN_IF_ERROR(
          check(be.rt()->api().cuMemcpy2DAsync(&c, be.rt()->stream()), "Split copy"));
    }
    off += sizes[j];
  }
  return true;
}

// Concat of device values (rotary embeddings' rotate_half, KV caches): one strided 2-D copy per
// input into its column block of the output seen as [outer, axis * inner].
Expected<bool> run_concat(const Node& node, NativeIO& io, CudaBackend& be) {
  if (io.in.empty()) return false;
  for (const auto& v : io.in)
    if (!v || v->dtype != io.in[0]->dtype || v->dims.size() != io.in[0]->dims.size()) return false;
  std::vector<int64_t> od = io.in[0]->dims;
  int64_t axis = node.attr_int("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(od.size());
  if (axis < 0 || axis >= static_cast<int64_t>(od.size())) return false;
  od[axis] = 0;
  for (const auto& v : io.in) {
    for (size_t d = 0; d < od.size(); ++d)
      if (static_cast<int64_t>(d) != axis && v->dims[d] != od[d]) return false;
    od[axis] += v->dims[axis];
  }
  FERRITE_ASSIGN_OR_RETURN(void* y, io.output(0, io.in[0]->dtype, od));
  const int64_t esize = static_cast<int64_t>(dtype_size(io.in[0]->dtype));
  const int64_t outer = prod(od, 0, axis), inner = prod(od, axis + 1) * esize;
  // Rows of whole 16-byte units: one kernel for all inputs (channels-last concatenations have
  // rows of a few dozen bytes, where a 2-D copy per input is slow).
  bool vector = reinterpret_cast<uintptr_t>(y) % 16 == 0;
  std::vector<const void*> srcs;
  std::vector<int64_t> widths;
  for (const auto& v : io.in) {
    const int64_t bytes = v->dims[axis] * inner;
    vector = vector && bytes % 16 == 0 && reinterpret_cast<uintptr_t>(v->ptr) % 16 == 0;
    srcs.push_back(v->ptr);
    widths.push_back(bytes / 16);
  }
  if (vector) {
    FERRITE_RETURN_IF_ERROR(be.lib->concat16(srcs, widths, outer, y));
    return true;
  }
  int64_t off = 0;
  for (const auto& v : io.in) {
    const int64_t len = v->dims[axis];
    if (len > 0 && outer > 0 && inner > 0) {
      CUDA_MEMCPY2D c{};
      c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
      c.srcDevice = dptr(v->ptr);
      c.srcPitch = static_cast<size_t>(len * inner);
      c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
      c.dstDevice = dptr(y);
      c.dstXInBytes = static_cast<size_t>(off * inner);
      c.dstPitch = static_cast<size_t>(od[axis] * inner);
      c.WidthInBytes = static_cast<size_t>(len * inner);
      c.Height = static_cast<size_t>(outer);
      FERRITE_RETURN_IF_ERROR(
          check(be.rt()->api().cuMemcpy2DAsync(&c, be.rt()->stream()), "Concat copy"));
    }
    off += len;
  }
  return true;
}

// Pad (opset 2 attributes or opset 11+ inputs, with opset 18's axes): every mode, any element
// size of 1-8 bytes, rank <= kMaxRank. Reflect needs pads < dim, wrap pads <= dim (else the host,
// which reports the error or computes the case).
Expected<bool> run_pad(const Node& node, NativeIO& io, CudaBackend& be) {
  if (!io.in[0]) return false;
  const auto& xd = io.in[0]->dims;
  const int rank = static_cast<int>(xd.size());
  const size_t esize = dtype_size(io.in[0]->dtype);
  if (rank == 0 || rank > kMaxRank || (esize != 1 && esize != 2 && esize != 4 && esize != 8))
    return false;
  std::vector<int64_t> pads;
  std::vector<int64_t> axes;
  unsigned long long fill = 0;
  if (node.opset < 11) {
    pads = node.attr_ints("pads");
    const float v = node.attr_float("value", 0.f);
    if (io.in[0]->dtype != DType::kF32) return false;
    std::memcpy(&fill, &v, sizeof v);
  } else {
    auto host_ints = [&](size_t i, std::vector<int64_t>* out) {
      if (io.in.size() <= i || !io.in[i]) return true;  // absent
      const Tensor* t = io.in[i]->host;
      if (!t || (t->dtype() != DType::kI64 && t->dtype() != DType::kI32)) return false;
      *out = t->to_int_vector();
      return true;
    };
    if (!host_ints(1, &pads) || !host_ints(3, &axes)) return false;
    if (io.in.size() > 2 && io.in[2]) {
      const Tensor* c = io.in[2]->host;
      if (!c || c->dtype() != io.in[0]->dtype || c->numel() != 1) return false;
      std::memcpy(&fill, c->raw(), esize);
    }
  }
  if (axes.empty())
    for (int d = 0; d < rank; ++d) axes.push_back(d);
  if (pads.size() != 2 * axes.size()) return false;
  const std::string mode = node.attr_string("mode", "constant");
  PadParams p{};
  p.rank = rank;
  p.esize = static_cast<int>(esize);
  p.fill = fill;
  p.mode = mode == "constant"  ? 0
           : mode == "reflect" ? 1
           : mode == "edge"    ? 2
           : mode == "wrap"    ? 3
                               : -1;
  if (p.mode < 0) return false;
  std::vector<int64_t> od = xd;
  for (int d = 0; d < rank; ++d) p.in_dims[d] = xd[d];
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (a < 0 || a >= rank) return false;
    const int64_t b = pads[k], e = pads[k + axes.size()];
    p.begin[a] = b;
    od[a] = xd[a] + b + e;
    if (od[a] < 0) return false;
    if (p.mode != 0 && od[a] > 0 && xd[a] == 0) return false;
    if (p.mode == 1 && (b >= xd[a] || e >= xd[a])) return false;
    if (p.mode == 3 && (b > xd[a] || e > xd[a])) return false;
  }
  for (int d = 0; d < rank; ++d) p.out_dims[d] = od[d];
  FERRITE_ASSIGN_OR_RETURN(void* y, io.output(0, io.in[0]->dtype, od));
  FERRITE_RETURN_IF_ERROR(be.lib->pad(io.in[0]->ptr, y, p));
  return true;
}

Expected<bool> run_gather(const Node& node, NativeIO& io, CudaBackend& be) {
  if (!io.in[0] || !io.in[1] || !io.error_flag) return false;
  const DevView& data = *io.in[0];
  const DevView& idx = *io.in[1];
  if (idx.dtype != DType::kI64 && idx.dtype != DType::kI32) return false;
  const size_t esize = dtype_size(data.dtype);
  if (esize != 1 && esize != 2 && esize != 4 && esize != 8) return false;
  int64_t axis = node.attr_int("axis", 0);
  const int64_t r = static_cast<int64_t>(data.dims.size());
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return false;
  std::vector<int64_t> out(data.dims.begin(), data.dims.begin() + axis);
  out.insert(out.end(), idx.dims.begin(), idx.dims.end());
  out.insert(out.end(), data.dims.begin() + axis + 1, data.dims.end());
  FERRITE_ASSIGN_OR_RETURN(void* y, io.output(0, data.dtype, out));
  const int64_t outer = prod(data.dims, 0, axis), inner = prod(data.dims, axis + 1);
  const int64_t n_idx = prod(idx.dims);
  if (outer * n_idx * inner == 0) return true;
  FERRITE_RETURN_IF_ERROR(be.lib->gather(data.ptr, idx.ptr, idx.dtype == DType::kI64, y, outer,
                                         data.dims[axis], n_idx, inner, static_cast<int>(esize),
                                         io.error_flag, io.error_tag));
  return true;
}

Expected<bool> run_binary(const Node& node, NativeIO& io, CudaBackend& be) {
  const DType dt = gemm_dtype(io);
  if (dt == DType::kUndefined || io.in.size() != 2 || !io.in[0] || !io.in[1]) return false;
  auto out = broadcast(io.in[0]->dims, io.in[1]->dims);
  if (!out) return false;
  BroadcastDims ab{}, bb{};
  if (!broadcast_strides(io.in[0]->dims, *out, &ab) ||
      !broadcast_strides(io.in[1]->dims, *out, &bb))
    return false;
  const std::string& op = node.op_type;
  int code = op == "Add" ? 0 : op == "Sub" ? 1 : op == "Mul" ? 2 : 3;
  FERRITE_ASSIGN_OR_RETURN(void* y, io.output(0, dt, *out));
  if (prod(*out) == 0) return true;
  FERRITE_RETURN_IF_ERROR(
      be.lib->binary_f32(io.in[0]->ptr, ab, io.in[1]->ptr, bb, y, prod(*out), code, dt));
  return true;
}

}  // namespace

namespace {

template <NativeOp F>
Expected<bool> on_backend(const Node& node, DeviceCall& call, void* backend) {
  return F(node, call, *static_cast<CudaBackend*>(backend));
}

// Embedding tables and other large constants stay on the GPU: a Gather from one runs there.
constexpr int64_t kLargeConstantBytes = 64 << 10;

bool integer_operands(const Node& node, void*) {
  const Value* a = node.input(0);
  return a && (a->type.dtype == DType::kI64 || a->type.dtype == DType::kI32);
}

bool heavy(const Node&, const std::vector<int64_t>&) {
  return true;
}
bool large_table(const Node&, const std::vector<int64_t>& constant_bytes) {
  return !constant_bytes.empty() && constant_bytes[0] >= kLargeConstantBytes;
}

}  // namespace

std::shared_ptr<const LibraryOps> cuda_library_ops() {
  static const std::shared_ptr<const LibraryOps> table = [] {
    auto t = std::make_shared<LibraryOps>();
    auto op = [](auto run, bool compute_heavy) {
      LibraryOp o;
      o.run_device = run;
      o.prefer_device = compute_heavy ? heavy : nullptr;
      return o;
    };
    t->add("ferrite", "FusedMatMul", op(on_backend<run_fused_matmul>, true));
    t->add("ferrite", "Attention", op(on_backend<run_attention>, true));
    t->add("", "MatMul", op(on_backend<run_matmul>, true));
    t->add("", "Gemm", op(on_backend<run_gemm>, true));
    t->add("", "Conv", op(on_backend<run_conv>, true));
    t->add("ferrite", "FusedConv", op(on_backend<run_conv>, true));
    t->add("", "ConvTranspose", op(on_backend<run_conv_transpose>, true));
    t->add("ferrite", "ConvGradWeight", op(on_backend<run_conv_grad_weight>, true));
    for (const char* pool : {"MaxPool", "AveragePool"})
      t->add("", pool, op(on_backend<run_pool>, true));
    t->add("ferrite", "Pool", op(on_backend<run_pool>, true));
    t->add("", "Split", op(on_backend<run_split>, false));
    t->add("", "Concat", op(on_backend<run_concat>, false));
    t->add("", "Pad", op(on_backend<run_pad>, true));
    LibraryOp gather = op(on_backend<run_gather>, false);
    gather.prefer_device = large_table;
    gather.sets_error_flag = true;
    t->add("", "Gather", gather);
    auto indexing = [&](const char* name, auto run) {
      LibraryOp o = op(run, false);
      o.sets_error_flag = true;  // indices out of range
      t->add("", name, o);
    };
    indexing("GatherElements", on_backend<run_gather_elements>);
    indexing("ScatterElements", on_backend<run_scatter_elements>);
    indexing("ScatterND", on_backend<run_scatter_nd>);
    indexing("GatherND", on_backend<run_gather_nd>);
    t->add("", "CumSum", op(on_backend<run_cumsum>, false));
    // Integer Div and Mod (index arithmetic the lowering leaves to library steps); before the
    // float Div, which takes every other Div.
    for (const char* name : {"Div", "Mod"}) {
      LibraryOp o = op(on_backend<run_int_divmod>, false);
      o.accepts = integer_operands;
      o.sets_error_flag = true;
      o.flag_error = "integer division or modulo by zero";
      t->add("", name, o);
    }
    for (const char* bin : {"Add", "Sub", "Mul", "Div"})
      t->add("", bin, op(on_backend<run_binary>, false));
    // Tensor-parallel collectives over NCCL (cuda_nccl.h).
    t->add("com.microsoft", "AllReduce", op(on_backend<run_all_reduce>, true));
    t->add("com.microsoft", "AllGather", op(on_backend<run_all_gather>, true));
    t->add("com.microsoft", "ReduceScatter", op(on_backend<run_reduce_scatter>, true));
    return t;
  }();
  return table;
}

}  // namespace ferrite::cuda
