#include "backends/cuda/cuda_attention.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace ferrite::cuda {

namespace {

const char* kFlashSource =
#include "backends/cuda/cuda_attention_source.inc"
    ;
const char* kFlashTcSource =
#include "backends/cuda/cuda_attention_tc_source.inc"
    ;
const char* kFlashPipeSource =
#include "backends/cuda/cuda_attention_pipelined_source.inc"
    ;

bool log_on(const char* topic) {
  const char* v = std::getenv("FERRITE_LOG");
  if (!v) return false;
  std::string s(v);
  return s == "all" || s.find(topic) != std::string::npos;
}

int bn_for(int dp) {
  return dp <= 64 ? 64 : 32;
}

int64_t smem_bytes(int dp, int bm, int bn) {
  // Q [bm][dp], K [bn][dp + 4], V [bn][dp], P [bm][bn + 4] (floats): see the kernel source.
  return 4 *
         (int64_t{bm} * dp + int64_t{bn} * (dp + 4) + int64_t{bn} * dp + int64_t{bm} * (bn + 4));
}

const char* storage_type(DType t) {
  switch (t) {
    case DType::kF32:
      return "float";
    case DType::kBF16:
      return "fe_bf16";
    case DType::kF16:
      return "fe_f16";
    default:
      return nullptr;
  }
}

// Shared memory of the tensor-core kernel: Q and K tiles [64][dp + 8], V^T [dp][64 + 8], 2-byte.
int64_t tc_smem_bytes(int dp) {
  return 2 * (int64_t{2} * kFlashTcRows * (dp + 8) + int64_t{dp} * (kFlashTcRows + 8));
}

// The pipelined variant: Q [64][dp + 8] and two buffers each of K and V [64][dp + 8], plus two
// [64][72] mask tiles when the mask is staged, 2-byte.
int64_t pipe_smem_bytes(int dp, bool mask_tiles) {
  return 2 * (int64_t{5} * kFlashTcRows * (dp + 8) + (mask_tiles ? 2 * kFlashTcRows * 72 : 0));
}

bool env_off(const char* name) {
  const char* env = std::getenv(name);
  return env && (std::string(env) == "0" || std::string(env) == "off");
}

int sm_version(const std::string& arch) {
  return arch.rfind("sm_", 0) == 0 ? std::atoi(arch.c_str() + 3) : 0;
}

}  // namespace

std::string flash_tc_kernel_name(int dp, bool pipelined) {
  return (pipelined ? "fe_flash_pipe_d" : "fe_flash_tc_d") + std::to_string(dp);
}

std::string flash_tc_module_source(DType dtype, int dp) {
  if (dtype != DType::kBF16 && dtype != DType::kF16) return {};
  return std::string("#define FE_T ") + storage_type(dtype) + "\n#define FE_TC_BF16 " +
         (dtype == DType::kBF16 ? "1" : "0") + "\n" + kFlashSource + kFlashTcSource +
         kFlashPipeSource + "FE_FLASH_TC(" + std::to_string(dp) + ")\nFE_FLASH_PIPE(" +
         std::to_string(dp) + ")\n";
}

bool flash_mask_tiles(const FlashProblem& p, const void* mask) {
  if (!p.has_mask || !mask || p.m_t != 1 || p.m_s % 8 != 0 ||
      reinterpret_cast<uintptr_t>(mask) % 16 != 0)
    return false;
  for (int64_t s : p.m_bs)
    if (s % 8 != 0) return false;
  return true;
}

FlashConfig choose_flash_tc_config(const FlashProblem& p, DType dtype, const std::string& arch,
                                   int64_t smem_limit, bool aligned16, bool mask_tiles) {
  FlashConfig c;
  if (env_off("FERRITE_CUDA_FLASH_TC")) return c;
  if ((dtype != DType::kBF16 && dtype != DType::kF16) || sm_version(arch) < 80) return c;
  const int64_t dmax = std::max(p.D, p.Dv);
  if (dmax > kFlashMaxHeadDim || p.batch.size() > 4) return c;
  const int dp = dmax <= 32 ? 32 : dmax <= 64 ? 64 : dmax <= 96 ? 96 : 128;
  if (tc_smem_bytes(dp) > smem_limit) return c;
  int64_t nb = 1;
  for (int64_t d : p.batch) nb *= d;
  const int64_t grid = nb * ((p.S + kFlashTcRows - 1) / kFlashTcRows);
  if (grid > 0x7fffffff) return c;
  c.dp = dp, c.bm = kFlashTcRows, c.bn = 64, c.smem = tc_smem_bytes(dp), c.grid = grid;
  // 16-byte copies need every row and batch offset on 8 elements.
  bool rows8 = aligned16 && p.D % 8 == 0 && p.Dv % 8 == 0;
  for (size_t d = 0; d < p.batch.size() && rows8; ++d)
    rows8 = p.q_bs[d] % 8 == 0 && p.k_bs[d] % 8 == 0 && p.v_bs[d] % 8 == 0 &&
            (p.o_bs.empty() || p.o_bs[d] % 8 == 0);
  rows8 = rows8 && p.q_rs % 8 == 0 && p.k_rs % 8 == 0 && p.v_rs % 8 == 0 && p.o_rs % 8 == 0;
  if (rows8 && pipe_smem_bytes(dp, mask_tiles) <= smem_limit &&
      !env_off("FERRITE_CUDA_FLASH_PIPE")) {
    c.pipelined = true;
    c.smem = pipe_smem_bytes(dp, mask_tiles);
  }
  return c;
}

std::string flash_kernel_name(int dp, int bm) {
  return "fe_flash_d" + std::to_string(dp) + "_m" + std::to_string(bm);
}

std::string flash_module_source(DType dtype, int dp, int bm) {
  const char* t = storage_type(dtype);
  if (!t) return {};
  return std::string("#define FE_T ") + t + "\n" + kFlashSource + "FE_FLASH(" + std::to_string(dp) +
         ", " + std::to_string(bm) + ", " + std::to_string(bn_for(dp)) + ")\n";
}

FlashConfig choose_flash_config(const FlashProblem& p, int sms, int64_t smem_limit,
                                std::string* why_not) {
  FlashConfig c;
  why_not->clear();
  const int64_t dmax = std::max(p.D, p.Dv);
  if (dmax > kFlashMaxHeadDim) {
    *why_not = "head dim " + std::to_string(dmax) + " > " + std::to_string(kFlashMaxHeadDim);
    return c;
  }
  if (p.batch.size() > 4) {
    *why_not = "more than 4 batch dims";
    return c;
  }
  c.dp = dmax <= 32 ? 32 : dmax <= 64 ? 64 : dmax <= 96 ? 96 : 128;
  c.bn = bn_for(c.dp);
  int64_t nb = 1;
  for (int64_t d : p.batch) nb *= d;
  const int64_t want = 2 * int64_t{std::max(1, sms)};
  for (int bm : {64, 32, 16}) {
    const int64_t smem = smem_bytes(c.dp, bm, c.bn);
    if (smem > smem_limit) continue;
    // A smaller tile covers the rows as well and wastes less.
    if (bm > 16 && p.S <= bm / 2) continue;
    const int64_t tiles = (p.S + bm - 1) / bm;
    c.bm = bm;
    c.smem = smem;
    c.grid = nb * tiles;
    if (c.grid >= want) break;
  }
  if (c.bm == 0) {
    *why_not = "needs " + std::to_string(smem_bytes(c.dp, 16, c.bn)) +
               " bytes of shared memory per block, the GPU allows " + std::to_string(smem_limit);
    return c;
  }
  if (c.grid > 0x7fffffff) *why_not = "more than 2^31 - 1 query tiles";
  return c;
}

std::unique_ptr<FlashAttention> FlashAttention::create(const CudaRuntime& rt,
                                                       const DeviceProperties& props,
                                                       const std::string& device_key) {
  auto f = std::unique_ptr<FlashAttention>(new FlashAttention());
  f->rt_ = &rt;
  f->arch_ = props.arch;
  f->device_key_ = device_key;
  f->sms_ = std::max(1, props.compute_units);
  int optin = 0;
  rt.api().cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                rt.device());
  f->smem_limit_ = std::max<int64_t>(optin, props.shared_memory_per_block);
  f->log_ = log_on("attention");
  f->log_fallback_ = f->log_ || log_on("fallback");
  return f;
}

std::string FlashAttention::unsupported(const FlashProblem& p, DType dtype) const {
  // Read per call, so that a test can compare both paths in one process.
  const char* env = std::getenv("FERRITE_CUDA_FLASH");
  if (env && (std::string(env) == "0" || std::string(env) == "off")) return "FERRITE_CUDA_FLASH=0";
  if (!storage_type(dtype)) return "dtype " + std::string(dtype_name(dtype));
  std::string why;
  choose_flash_config(p, sms_, smem_limit_, &why);
  return why;
}

void FlashAttention::note(const std::string& msg, bool fallback) {
  if (!(fallback ? log_fallback_ : log_)) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!noted_.insert(msg).second) return;
  std::fprintf(stderr, "[attention] cuda: %s\n", msg.c_str());
}

Status FlashAttention::run(const FlashProblem& p, DType dtype, const void* q, const void* k,
                           const void* v, const void* mask, void* out) {
  std::string why;
  const FlashConfig c = choose_flash_config(p, sms_, smem_limit_, &why);
  if (!why.empty() || !storage_type(dtype))
    return err("cuda: fused attention cannot run this call: ",
               why.empty() ? "dtype " + std::string(dtype_name(dtype)) : why);
  // bf16 / f16 on sm_80+: the tensor-core kernel, else the f32 CUDA-core one.
  auto on16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  const bool mask_tiles = flash_mask_tiles(p, mask);
  const FlashConfig tc = choose_flash_tc_config(
      p, dtype, arch_, smem_limit_, on16(q) && on16(k) && on16(v) && on16(out), mask_tiles);
  const FlashConfig& use = tc.bm ? tc : c;
  FlashParams fp{};
  fp.nb = 1;
  for (int64_t d : p.batch) fp.nb *= d;
  if (fp.nb == 0 || p.S == 0 || p.Dv == 0) return Status::ok();
  fp.S = p.S, fp.T = p.T, fp.D = p.D, fp.Dv = p.Dv;
  fp.q_tiles = (p.S + use.bm - 1) / use.bm;
  fp.batch_rank = static_cast<int64_t>(p.batch.size());
  fp.q_rs = p.q_rs ? p.q_rs : p.D;
  fp.k_rs = p.k_rs ? p.k_rs : p.D;
  fp.v_rs = p.v_rs ? p.v_rs : p.Dv;
  fp.o_rs = p.o_rs ? p.o_rs : p.Dv;
  int64_t o_run = p.S * p.Dv;  // contiguous output: batch strides from the innermost dim out
  for (size_t d = p.batch.size(); d-- > 0;) {
    fp.o_bs[d] = p.o_bs.empty() ? o_run : p.o_bs[d];
    o_run *= p.batch[d];
  }
  for (size_t d = 0; d < p.batch.size(); ++d) {
    fp.batch_dims[d] = p.batch[d];
    fp.q_bs[d] = p.q_bs[d];
    fp.k_bs[d] = p.k_bs[d];
    fp.v_bs[d] = p.v_bs[d];
    fp.m_bs[d] = p.has_mask ? p.m_bs[d] : 0;
  }
  fp.m_s = p.m_s, fp.m_t = p.m_t;
  fp.scale = p.scale;
  fp.causal = p.causal, fp.nan_to_zero = p.nan_to_zero, fp.has_mask = p.has_mask && mask;
  fp.masked_rows_zero = p.masked_rows_zero;
  fp.mask_tile = tc.pipelined && mask_tiles;
  const uintptr_t align = 4 * dtype_size(dtype);
  fp.vec = p.D % 4 == 0 && p.Dv % 4 == 0 && fp.q_rs % 4 == 0 && fp.k_rs % 4 == 0 &&
           fp.v_rs % 4 == 0 && reinterpret_cast<uintptr_t>(q) % align == 0 &&
           reinterpret_cast<uintptr_t>(k) % align == 0 &&
           reinterpret_cast<uintptr_t>(v) % align == 0;

  const std::string name =
      tc.bm ? flash_tc_kernel_name(tc.dp, tc.pipelined) : flash_kernel_name(c.dp, c.bm);
  const std::string key = std::string(dtype_name(dtype)) + ":" + name;
  CUfunction fn = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Loaded& l = modules_[key];
    if (!l.fn) {
      FERRITE_ASSIGN_OR_RETURN(CubinResult cr,
                               compile_to_cubin(tc.bm ? flash_tc_module_source(dtype, tc.dp)
                                                      : flash_module_source(dtype, c.dp, c.bm),
                                                arch_, "ferrite_flash_" + key, device_key_));
      FERRITE_ASSIGN_OR_RETURN(l.module, CubinModule::load(*rt_, cr.cubin));
      l.fn = reinterpret_cast<CUfunction>(l.module->symbol(name));
      if (!l.fn) return err("cuda: kernel ", name, " missing from its module");
    }
    if (use.smem > l.smem_set && use.smem > (48 << 10)) {
      FERRITE_RETURN_IF_ERROR(
          check(rt_->api().cuFuncSetAttribute(l.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                              static_cast<int>(use.smem)),
                "fused attention shared memory"));
      l.smem_set = use.smem;
    }
    fn = l.fn;
    ++launches_;
  }
  if (log_)
    note("fused attention " + key + " (" + std::to_string(fp.nb) + " x [" + std::to_string(p.S) +
             " x " + std::to_string(p.T) + "], D " + std::to_string(p.D) + ", Dv " +
             std::to_string(p.Dv) + (p.causal ? ", causal" : "") +
             (fp.has_mask ? (fp.mask_tile ? ", mask tiles" : ", mask") : "") + "): " +
             std::to_string(use.grid) + " blocks, " + std::to_string(use.smem) + " B shared",
         false);
  void* args[] = {&q, &k, &v, &mask, &out, &fp};
  return check(
      rt_->api().cuLaunchKernel(fn, static_cast<unsigned>(use.grid), 1, 1, kFlashThreads, 1, 1,
                                static_cast<unsigned>(use.smem), rt_->stream(), args, nullptr),
      "fused attention launch");
}

}  // namespace ferrite::cuda
