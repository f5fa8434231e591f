// A small fixed-size thread pool with a blocking parallel_for, for kernel rows.
#pragma once

#include <condition_variable>
#include <cstdint>
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
  // Calls f(begin, end) over disjoint chunks of [0, n), on the pool and the calling thread.
  void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& f);

 private:
  void worker_loop();
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0, chunk_ = 1, next_ = 0;
  int active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace ferrite
