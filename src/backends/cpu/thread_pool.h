// A small fixed-size thread pool with a blocking parallel_for, for kernel rows.
//
// Idle workers spin for a while before they sleep, and the caller before it sleeps waiting for
// the last chunks (FERRITE_POOL_SPIN_US, default 50; 0 = off): waking a sleeping thread through
// the kernel costs about 25 us here, as much as a small parallel loop. On an oversubscribed
// machine (a host shared with compiler jobs) the spinning thread takes CPU time from the thread
// doing the work, and 0 may be faster there; see BENCHMARKS.md.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ferrite {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls f(begin, end) over disjoint chunks of [0, n), on the pool and the calling thread. An
  // exception thrown by f (oneDNN's dnnl::error, std::bad_alloc) stops the remaining chunks and
  // is rethrown here once every thread has left the job, instead of terminating a worker.
  void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& f);

 private:
  void worker_loop();
  void fail_job(std::exception_ptr e);  // under mu_
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0, chunk_ = 1, next_ = 0;
  std::atomic<int> active_{0};           // threads inside the current job (written under mu_)
  std::atomic<uint64_t> generation_{0};  // one per job (written under mu_)
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;     // the current job's first exception (under mu_)
  int sleeping_ = 0;             // workers blocked on cv_
  bool caller_waiting_ = false;  // the caller is blocked on done_cv_
  int64_t spin_ns_;
};

}  // namespace ferrite
