// GXU launch engine: validates a launch against the device's rules, translates the kernel's
// device pointers, and runs the program ids of the grid on a pool of host threads (the device's
// compute units). Launches complete before returning (one in-order stream).
#include <dlfcn.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "gxu.h"

namespace gxu {

namespace {

using KernelFn = void (*)(void* const*, const int64_t*, int64_t, int64_t);

// Workers that take program ids from a shared counter.
class ComputeUnits {
 public:
  explicit ComputeUnits(int n) {
    for (int i = 1; i < n; ++i) workers_.emplace_back([this] { loop(); });
  }
  ~ComputeUnits() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void run(int64_t grid, const std::function<void(int64_t)>& body) {
    std::lock_guard<std::mutex> one_launch(launch_mu_);
    {
      std::lock_guard<std::mutex> l(mu_);
      body_ = &body;
      grid_ = grid;
      next_.store(0);
      active_ = static_cast<int>(workers_.size());
      ++generation_;
    }
    cv_.notify_all();
    work();
    std::unique_lock<std::mutex> l(mu_);
    done_cv_.wait(l, [&] { return active_ == 0; });
    body_ = nullptr;
  }

 private:
  void work() {
    for (int64_t b; (b = next_.fetch_add(1)) < grid_;) (*body_)(b);
  }
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      work();
      std::lock_guard<std::mutex> l(mu_);
      if (--active_ == 0) done_cv_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mu_, launch_mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t)>* body_ = nullptr;
  int64_t grid_ = 0;
  std::atomic<int64_t> next_{0};
  int active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

int configured_units() {
  if (const char* v = std::getenv("GXU_COMPUTE_UNITS")) {
    int n = std::atoi(v);
    if (n >= 1 && n <= 256) return n;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

ComputeUnits& units() {
  static ComputeUnits* u = new ComputeUnits(configured_units());  // lives for the process
  return *u;
}

bool grid_legal(int64_t g) { return g >= 1 && (g <= kGridAnyUpto || g % kGridMultiple == 0); }

void log_launch(fe_function fn, int64_t grid, int32_t block) {
  static const char* path = std::getenv("GXU_LAUNCH_LOG");
  if (!path || !*path) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> l(mu);
  Dl_info info{};
  const char* name = dladdr(reinterpret_cast<void*>(fn), &info) && info.dli_sname
                         ? info.dli_sname : "?";
  if (FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "launch %s grid=%lld block=%d legal=%d\n", name,
                 static_cast<long long>(grid), block, grid_legal(grid) ? 1 : 0);
    std::fclose(f);
  }
}

}  // namespace

int32_t compute_units() { return units().size(); }

void run_on_units(int64_t n, const std::function<void(int64_t)>& body) {
  if (n > 0) units().run(n, body);
}

fe_status launch_kernel(fe_function fn, int64_t gx, int64_t gy, int64_t gz, int32_t block,
                        int64_t shared, fe_stream stream, const fe_kernel_args* args) {
  if (!fn || !args) return fail(kInvalidValue, "gxuLaunchKernel: null function or arguments");
  log_launch(fn, gx, block);
  if (!grid_legal(gx))
    return fail(kInvalidGridSize, "Invalid grid size " + std::to_string(gx) +
                                      " (must be <= 48 or multiple of 48)");
  if (gy != 1 || gz != 1)
    return fail(kInvalidGridSize, "Invalid grid " + std::to_string(gx) + "x" + std::to_string(gy) +
                                      "x" + std::to_string(gz) + " (gxu grids are 1-D)");
  if (block != kWarpSize)
    return fail(kInvalidBlockSize, "Invalid block size " + std::to_string(block) +
                                       " (gxu runs one warp of 32 threads per block)");
  if (shared < 0 || shared > 48 * 1024)
    return fail(kInvalidValue, "Invalid shared memory size " + std::to_string(shared));
  if (stream != 0) return fail(kInvalidValue, "gxuLaunchKernel: unknown stream");
  if (args->num_bufs < 0 || args->num_syms < 0 || (args->num_bufs && !args->bufs) ||
      (args->num_syms && !args->syms))
    return fail(kInvalidValue, "gxuLaunchKernel: bad argument counts");
  std::vector<void*> host(static_cast<size_t>(args->num_bufs));
  for (int32_t i = 0; i < args->num_bufs; ++i) {
    host[i] = translate(args->bufs[i], 0);
    if (!host[i])
      return fail(kInvalidDevicePointer,
                  "gxuLaunchKernel: argument " + std::to_string(i) + " is not a device pointer");
  }
  auto kernel = reinterpret_cast<KernelFn>(fn);
  const int64_t* syms = args->syms;
  std::function<void(int64_t)> body = [&](int64_t b) { kernel(host.data(), syms, b, gx); };
  units().run(gx, body);
  return kSuccess;
}

fe_status synchronize() { return kSuccess; }  // launches and copies complete in order

}  // namespace gxu
