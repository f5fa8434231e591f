// The cpu thread pool carries an exception thrown in a task (oneDNN's dnnl::error, bad_alloc)
// back to the caller of parallel_for instead of terminating the process from a worker thread;
// the cpu device turns it into an error of the node.
#include "backends/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

namespace ferrite {
namespace {

TEST(ThreadPool, ExceptionInATaskReachesTheCaller) {
  ThreadPool pool(4);
  for (int failing : {0, 37, 99}) {
    SCOPED_TRACE(failing);
    EXPECT_THROW(pool.parallel_for(100, 1,
                                   [&](int64_t b, int64_t e) {
                                     if (b <= failing && failing < e)
                                       throw std::runtime_error("scratch allocation failed");
                                   }),
                 std::runtime_error);
  }
  // The pool still works afterwards.
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 4950);
}

}  // namespace
}  // namespace ferrite
