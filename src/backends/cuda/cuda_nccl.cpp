#include "backends/cuda/cuda_nccl.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace ferrite::cuda {

namespace {

// The part of NCCL's C API used here, declared from its documentation (nccl.h is not needed to
// build: the library is opened at run time).
using ncclComm_t = void*;
using ncclResult_t = int;
constexpr int kNcclSum = 0;
// nccl.h: NCCL_UNIQUE_ID_BYTES, and the id passed by value to ncclCommInitRank.
constexpr size_t kNcclUniqueIdBytes = 128;
struct ncclUniqueId {
  char internal[kNcclUniqueIdBytes];
};

struct Nccl {
  std::string library;
  int version = 0;
  ncclResult_t (*ncclGetVersion)(int*) = nullptr;
  const char* (*ncclGetErrorString)(ncclResult_t) = nullptr;
  ncclResult_t (*ncclCommInitAll)(ncclComm_t*, int, const int*) = nullptr;
  ncclResult_t (*ncclGetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*ncclCommInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*ncclCommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*ncclAllReduce)(const void*, void*, size_t, int, int, ncclComm_t,
                                CUstream) = nullptr;
  ncclResult_t (*ncclAllGather)(const void*, void*, size_t, int, ncclComm_t, CUstream) = nullptr;
  ncclResult_t (*ncclReduceScatter)(const void*, void*, size_t, int, int, ncclComm_t,
                                    CUstream) = nullptr;
};

Expected<Nccl> load_nccl() {
  Nccl n;
  std::vector<std::string> names = {"libnccl.so.2", "libnccl.so"};
  if (const char* e = std::getenv("FERRITE_CUDA_LIB_NCCL"); e && *e) names.insert(names.begin(), e);
  void* h = nullptr;
  std::string tried;
  for (const auto& name : names) {
    if ((h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))) {
      n.library = name;
      break;
    }
    const char* e = dlerror();
    tried += (tried.empty() ? "" : "; ") + name + (e ? std::string(" (") + e + ")" : "");
  }
  if (!h)
    return err("cannot load NCCL: tried ", tried,
               " (install PyTorch's nvidia-nccl wheel or the system's libnccl2, or set "
               "FERRITE_CUDA_LIB_NCCL)");
  auto sym = [&](const char* s, auto& fn) -> Status {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, s));
    if (!fn) return err(n.library, " lacks ", s);
    return Status::ok();
  };
  FERRITE_RETURN_IF_ERROR(sym("ncclGetVersion", n.ncclGetVersion));
  FERRITE_RETURN_IF_ERROR(sym("ncclGetErrorString", n.ncclGetErrorString));
  FERRITE_RETURN_IF_ERROR(sym("ncclCommInitAll", n.ncclCommInitAll));
  FERRITE_RETURN_IF_ERROR(sym("ncclGetUniqueId", n.ncclGetUniqueId));
  FERRITE_RETURN_IF_ERROR(sym("ncclCommInitRank", n.ncclCommInitRank));
  FERRITE_RETURN_IF_ERROR(sym("ncclCommDestroy", n.ncclCommDestroy));
  FERRITE_RETURN_IF_ERROR(sym("ncclAllReduce", n.ncclAllReduce));
  FERRITE_RETURN_IF_ERROR(sym("ncclAllGather", n.ncclAllGather));
  FERRITE_RETURN_IF_ERROR(sym("ncclReduceScatter", n.ncclReduceScatter));
  n.ncclGetVersion(&n.version);
  // Collectives inside CUDA graph capture need NCCL 2.9.
  if (n.version < 20900) return err(n.library, " is NCCL ", n.version, ": 2.9 or later is needed");
  return n;
}

Expected<const Nccl*> nccl() {
  static std::once_flag flag;
  static Expected<Nccl>* loaded = nullptr;  // never freed: the library stays loaded
  std::call_once(flag, [] { loaded = new Expected<Nccl>(load_nccl()); });
  if (!*loaded) return loaded->status();
  return &loaded->value();
}

Status nccl_check(const Nccl& n, ncclResult_t r, const char* what) {
  if (r == 0) return Status::ok();
  return err("NCCL ", what, ": ", n.ncclGetErrorString(r));
}

// NCCL's ncclDataType_t for a dtype, or -1.
int nccl_type(DType t) {
  switch (t) {
    case DType::kI8:
      return 0;
    case DType::kU8:
      return 1;
    case DType::kI32:
      return 2;
    case DType::kU32:
      return 3;
    case DType::kI64:
      return 4;
    case DType::kU64:
      return 5;
    case DType::kF16:
      return 6;
    case DType::kF32:
      return 7;
    case DType::kF64:
      return 8;
    case DType::kBF16:
      return 9;
    default:
      return -1;
  }
}

class NcclCommunicator : public Communicator {
 public:
  // `keep`: what must outlive the communicator (the GPU context a rank of another process was
  // made in), or null.
  NcclCommunicator(ncclComm_t comm, int rank, int size, int gpu,
                   std::shared_ptr<const void> keep = nullptr)
      : comm_(comm), rank_(rank), size_(size), gpu_(gpu), keep_(std::move(keep)) {}
  ~NcclCommunicator() override {
    if (auto n = nccl(); n && comm_) (*n)->ncclCommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override {
    return str_cat("NCCL rank ", rank_, " of ", size_, " (GPU ", gpu_, ")");
  }
  // The collectives run on the GPU, as library ops of the rank's cuda device: host memory is
  // not what this group exchanges.
  Status all_reduce_sum(const void*, void*, int64_t, DType) override { return host_error(); }
  Status all_gather(const void*, void*, int64_t, DType) override { return host_error(); }
  Status reduce_scatter_sum(const void*, void*, int64_t, DType) override { return host_error(); }
  // NCCL has no abort for a rank that never arrives; the ranks of this process fail only before
  // their first collective (a bad input), which every rank meets alike.
  void abort(const std::string&) override {}
  void* native(const char* kind) const override {
    return std::string(kind) == "nccl" ? comm_ : nullptr;
  }

 private:
  Status host_error() const {
    return err(describe(), ": a collective of host memory (the NCCL group runs them on the GPU)");
  }
  ncclComm_t comm_;
  int rank_, size_, gpu_;
  std::shared_ptr<const void> keep_;
};

struct Bound {
  const Nccl* n;
  ncclComm_t comm;
  int size;
};

Expected<Bound> bound_nccl(const Node& node) {
  Communicator* c = bound_communicator();
  void* comm = c ? c->native("nccl") : nullptr;
  if (!comm && c)
    return err(node.describe(), ": on cuda the collectives run on the GPU over NCCL, not over ",
               c->describe(), " (from Python: tensor_parallel=\"auto\" makes the NCCL group)");
  if (!comm)
    return err(node.describe(),
               ": on cuda a collective runs in a tensor-parallel run over NCCL "
               "(--tensor-parallel N with N GPUs)");
  FERRITE_ASSIGN_OR_RETURN(const Nccl* n, nccl());
  if (node.has_attr("group_size") && node.attr_int("group_size") != c->size())
    return err(node.describe(), ": group_size ", node.attr_int("group_size"), " but the run has ",
               c->size(), " ranks");
  return Bound{n, comm, c->size()};
}

int64_t numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// Rank-major blocks [g][outer][chunk] <-> [outer][g][chunk] (chunk bytes), one 2-D copy per rank.
Status permute_blocks(CudaBackend& be, const void* src, void* dst, int64_t g, int64_t outer,
                      size_t chunk, bool to_outer_major) {
  for (int64_t r = 0; r < g; ++r) {
    CUDA_MEMCPY2D c{};
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    const size_t block = static_cast<size_t>(r * outer) * chunk,
                 col = static_cast<size_t>(r) * chunk;
    c.srcDevice = reinterpret_cast<CUdeviceptr>(src);
    c.dstDevice = reinterpret_cast<CUdeviceptr>(dst);
    if (to_outer_major) {
      c.srcXInBytes = 0;
      c.srcY = 0;
      c.srcDevice += block;
      c.srcPitch = chunk;
      c.dstXInBytes = col;
      c.dstPitch = chunk * static_cast<size_t>(g);
    } else {
      c.srcXInBytes = col;
      c.srcPitch = chunk * static_cast<size_t>(g);
      c.dstDevice += block;
      c.dstPitch = chunk;
    }
    c.WidthInBytes = chunk;
    c.Height = static_cast<size_t>(outer);
    FERRITE_RETURN_IF_ERROR(
        check(be.rt()->api().cuMemcpy2DAsync(&c, be.rt()->stream()), "collective block copy"));
  }
  return Status::ok();
}

int64_t axis_of(const Node& node, size_t rank) {
  int64_t a = node.attr_int("axis", 0);
  return a < 0 ? a + static_cast<int64_t>(rank) : a;
}

}  // namespace

Expected<std::vector<std::unique_ptr<Communicator>>> make_nccl_group(int size) {
  FERRITE_ASSIGN_OR_RETURN(const Nccl* n, nccl());
  FERRITE_ASSIGN_OR_RETURN(const Driver* d, driver());
  int count = 0;
  FERRITE_RETURN_IF_ERROR(check(d->cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (count < size)
    return err("cuda: tensor-parallel ", size, " needs ", size, " GPUs (one rank each), ", count,
               " visible");
  std::vector<ncclComm_t> comms(static_cast<size_t>(size));
  std::vector<int> devs;
  for (int r = 0; r < size; ++r) devs.push_back(r);
  FERRITE_RETURN_IF_ERROR(
      nccl_check(*n, n->ncclCommInitAll(comms.data(), size, devs.data()), "ncclCommInitAll"));
  std::vector<std::unique_ptr<Communicator>> group;
  for (int r = 0; r < size; ++r)
    group.push_back(std::make_unique<NcclCommunicator>(comms[static_cast<size_t>(r)], r, size, r));
  return group;
}

Expected<std::string> make_nccl_id() {
  FERRITE_ASSIGN_OR_RETURN(const Nccl* n, nccl());
  ncclUniqueId id{};
  FERRITE_RETURN_IF_ERROR(nccl_check(*n, n->ncclGetUniqueId(&id), "ncclGetUniqueId"));
  return std::string(id.internal, kNcclUniqueIdBytes);
}

Expected<std::unique_ptr<Communicator>> make_nccl_rank(std::shared_ptr<CudaBackend> gpu,
                                                       int ordinal, const std::string& id, int rank,
                                                       int size) {
  FERRITE_ASSIGN_OR_RETURN(const Nccl* n, nccl());
  if (id.size() != kNcclUniqueIdBytes)
    return err("NCCL: a group id is ", kNcclUniqueIdBytes, " bytes (ncclGetUniqueId), got ",
               id.size());
  if (size < 1 || rank < 0 || rank >= size)
    return err("NCCL: rank ", rank, " of ", size, " is not a rank of the group");
  ncclUniqueId uid{};
  std::memcpy(uid.internal, id.data(), kNcclUniqueIdBytes);
  // NCCL takes the GPU from the calling thread's current context: the rank's own.
  FERRITE_RETURN_IF_ERROR(gpu->rt()->make_current());
  ncclComm_t comm = nullptr;
  FERRITE_RETURN_IF_ERROR(
      nccl_check(*n, n->ncclCommInitRank(&comm, size, uid, rank), "ncclCommInitRank"));
  // The communicator lives in the GPU's primary context: the backend keeps it retained.
  return std::unique_ptr<Communicator>(
      std::make_unique<NcclCommunicator>(comm, rank, size, ordinal, std::move(gpu)));
}

Expected<bool> run_all_reduce(const Node& node, NativeIO& io, CudaBackend& be) {
  FERRITE_ASSIGN_OR_RETURN(Bound b, bound_nccl(node));
  for (size_t i = 0; i < io.in.size(); ++i) {
    if (!io.in[i]) return false;
    const DevView& x = *io.in[i];
    const int t = nccl_type(x.dtype);
    if (t < 0) return err(node.describe(), ": NCCL has no ", dtype_name(x.dtype));
    FERRITE_ASSIGN_OR_RETURN(void* y, io.output(i, x.dtype, x.dims));
    FERRITE_RETURN_IF_ERROR(
        nccl_check(*b.n,
                   b.n->ncclAllReduce(x.ptr, y, static_cast<size_t>(numel(x.dims)), t, kNcclSum,
                                      b.comm, be.rt()->stream()),
                   "AllReduce"));
  }
  return true;
}

Expected<bool> run_all_gather(const Node& node, NativeIO& io, CudaBackend& be) {
  FERRITE_ASSIGN_OR_RETURN(Bound b, bound_nccl(node));
  for (size_t i = 0; i < io.in.size(); ++i) {
    if (!io.in[i]) return false;
    const DevView& x = *io.in[i];
    const int t = nccl_type(x.dtype);
    if (t < 0) return err(node.describe(), ": NCCL has no ", dtype_name(x.dtype));
    const int64_t axis = axis_of(node, x.dims.size());
    std::vector<int64_t> od = x.dims;
    od[static_cast<size_t>(axis)] *= b.size;
    FERRITE_ASSIGN_OR_RETURN(void* y, io.output(i, x.dtype, od));
    int64_t outer = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= x.dims[static_cast<size_t>(k)];
    const size_t count = static_cast<size_t>(numel(x.dims));
    void* gathered = y;
    if (outer != 1) {  // rank-major first, then each rank's block into its columns
      FERRITE_ASSIGN_OR_RETURN(gathered, io.scratch(count * b.size * dtype_size(x.dtype)));
    }
    FERRITE_RETURN_IF_ERROR(
        nccl_check(*b.n, b.n->ncclAllGather(x.ptr, gathered, count, t, b.comm, be.rt()->stream()),
                   "AllGather"));
    if (outer != 1)
      FERRITE_RETURN_IF_ERROR(
          permute_blocks(be, gathered, y, b.size, outer,
                         count / static_cast<size_t>(outer) * dtype_size(x.dtype), true));
  }
  return true;
}

Expected<bool> run_reduce_scatter(const Node& node, NativeIO& io, CudaBackend& be) {
  FERRITE_ASSIGN_OR_RETURN(Bound b, bound_nccl(node));
  for (size_t i = 0; i < io.in.size(); ++i) {
    if (!io.in[i]) return false;
    const DevView& x = *io.in[i];
    const int t = nccl_type(x.dtype);
    if (t < 0) return err(node.describe(), ": NCCL has no ", dtype_name(x.dtype));
    const int64_t axis = axis_of(node, x.dims.size());
    std::vector<int64_t> od = x.dims;
    if (od[static_cast<size_t>(axis)] % b.size != 0)
      return err(node.describe(), ": ", od[static_cast<size_t>(axis)], " along axis ", axis,
                 " is not a multiple of ", b.size);
    od[static_cast<size_t>(axis)] /= b.size;
    FERRITE_ASSIGN_OR_RETURN(void* y, io.output(i, x.dtype, od));
    int64_t outer = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= x.dims[static_cast<size_t>(k)];
    const size_t count = static_cast<size_t>(numel(od));
    const void* send = x.ptr;
    if (outer != 1) {  // each rank's part contiguous first
      FERRITE_ASSIGN_OR_RETURN(void* tmp, io.scratch(count * b.size * dtype_size(x.dtype)));
      FERRITE_RETURN_IF_ERROR(
          permute_blocks(be, x.ptr, tmp, b.size, outer,
                         count / static_cast<size_t>(outer) * dtype_size(x.dtype), false));
      send = tmp;
    }
    FERRITE_RETURN_IF_ERROR(nccl_check(
        *b.n, b.n->ncclReduceScatter(send, y, count, t, kNcclSum, b.comm, be.rt()->stream()),
        "ReduceScatter"));
  }
  return true;
}

}  // namespace ferrite::cuda
