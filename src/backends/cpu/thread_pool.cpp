#include "backends/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace ferrite {

namespace {

// How long idle threads spin before sleeping: FERRITE_POOL_SPIN_US (0 to 1e6, default 50, as
// ONNX Runtime's pool spins by default). Measured on the idle 2-core host at 2 threads,
// MobileNetV3 went from 10.9 ms to 7.2 ms per run with it (BENCHMARKS.md): a model's hundred
// library calls each wake a sleeping worker otherwise. On a host shared with other busy processes
// 0 may be better: the spinning thread takes time from the one doing the work.
int64_t spin_ns_from_env() {
  const char* v = std::getenv("FERRITE_POOL_SPIN_US");
  if (!v || !*v) return 50'000;
  char* end = nullptr;
  long us = std::strtol(v, &end, 10);
  return *end == '\0' && us >= 0 && us <= 1'000'000 ? static_cast<int64_t>(us) * 1000 : 0;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until ready() or `ns` nanoseconds have passed; returns ready().
template <class Ready>
bool spin_until(Ready ready, int64_t ns) {
  if (ns <= 0) return ready();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 1;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if ((i & 255) == 0 && std::chrono::steady_clock::now() - t0 > std::chrono::nanoseconds(ns))
      return ready();
  }
}

}  // namespace

ThreadPool::ThreadPool(int threads) : spin_ns_(spin_ns_from_env()) {
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
    spin_until([&] { return stop_.load() || generation_.load() != seen; }, spin_ns_);
    std::unique_lock<std::mutex> lock(mu_);
    if (!stop_ && generation_ == seen) {
      ++sleeping_;
      cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
      --sleeping_;
    }
    if (stop_) return;
    seen = generation_;
    ++active_;
    while (next_ < n_) {
      int64_t b = next_;
      int64_t e = std::min(n_, b + chunk_);
      next_ = e;
      const auto* job = job_;
      lock.unlock();
      std::exception_ptr failed;
      try {
        (*job)(b, e);
      } catch (...) {
        failed = std::current_exception();
      }
      lock.lock();
      if (failed) fail_job(failed);
    }
    if (--active_ == 0 && caller_waiting_) done_cv_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk,
                              const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  int64_t parts =
      std::min<int64_t>(size() * 4, std::max<int64_t>(1, n / std::max<int64_t>(min_chunk, 1)));
  if (workers_.empty() || parts <= 1) {
    f(0, n);
    return;
  }
  std::exception_ptr failed;
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &f;
  n_ = n;
  chunk_ = (n + parts - 1) / parts;
  next_ = 0;
  ++generation_;
  ++active_;
  if (sleeping_ > 0) cv_.notify_all();
  while (next_ < n_) {
    int64_t b = next_;
    int64_t e = std::min(n_, b + chunk_);
    next_ = e;
    lock.unlock();
    try {
      f(b, e);
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    if (failed) fail_job(failed);
  }
  if (--active_ > 0) {
    // Workers still run their last chunks: usually for microseconds.
    lock.unlock();
    spin_until([&] { return active_.load() == 0; }, spin_ns_);
    lock.lock();
    if (active_ > 0) {
      caller_waiting_ = true;
      done_cv_.wait(lock, [&] { return active_.load() == 0; });
      caller_waiting_ = false;
    }
  }
  job_ = nullptr;
  n_ = 0;
  // Every thread is out of f (which the job pointed to): now the error may unwind the caller.
  std::exception_ptr error = std::move(error_);
  error_ = nullptr;
  if (error) std::rethrow_exception(error);
}

void ThreadPool::fail_job(std::exception_ptr e) {
  if (!error_) error_ = std::move(e);
  next_ = n_;  // hand out no more chunks
}

}  // namespace ferrite
