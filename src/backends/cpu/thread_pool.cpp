#include "backends/cpu/thread_pool.h"

#include <algorithm>

namespace ferrite {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    ++active_;
    while (next_ < n_) {
      int64_t b = next_;
      int64_t e = std::min(n_, b + chunk_);
      next_ = e;
      const auto* job = job_;
      lock.unlock();
      (*job)(b, e);
      lock.lock();
    }
    if (--active_ == 0) done_cv_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk,
                              const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  int64_t parts = std::min<int64_t>(size() * 4, std::max<int64_t>(1, n / std::max<int64_t>(min_chunk, 1)));
  if (workers_.empty() || parts <= 1) {
    f(0, n);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &f;
  n_ = n;
  chunk_ = (n + parts - 1) / parts;
  next_ = 0;
  ++generation_;
  ++active_;
  cv_.notify_all();
  while (next_ < n_) {
    int64_t b = next_;
    int64_t e = std::min(n_, b + chunk_);
    next_ = e;
    lock.unlock();
    f(b, e);
    lock.lock();
  }
  if (--active_ > 0) done_cv_.wait(lock, [&] { return active_ == 0; });
  job_ = nullptr;
  n_ = 0;
}

}  // namespace ferrite
