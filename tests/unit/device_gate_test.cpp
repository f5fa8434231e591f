// DeviceGate (execute/device_gate.h): runs share the device, a recording has it alone, a waiting
// recording is not starved by a stream of new runs, and DeviceTurn calls enter/leave once.
#include "execute/device_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace ferrite {
namespace {

using namespace std::chrono_literals;

TEST(DeviceGate, RunsOverlapAndARecordingIsAlone) {
  DeviceGate gate;
  std::atomic<int> inside{0}, most_shared{0}, alone_with_others{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> runs;
  for (int t = 0; t < 4; ++t)
    runs.emplace_back([&] {
      while (!stop) {
        DeviceTurn turn(&gate, nullptr, nullptr);
        int n = ++inside;
        int seen = most_shared.load();
        while (n > seen && !most_shared.compare_exchange_weak(seen, n)) {
        }
        std::this_thread::sleep_for(200us);
        --inside;
      }
    });
  // Recordings while the runs go on: each must find no one else inside once it is alone, and
  // must get its turn although new runs keep arriving (writer preference).
  for (int r = 0; r < 20; ++r) {
    DeviceTurn turn(&gate, nullptr, nullptr);
    ++inside;
    turn.alone();
    if (inside.load() != 1) ++alone_with_others;
    std::this_thread::sleep_for(100us);
    if (inside.load() != 1) ++alone_with_others;
    --inside;
  }
  stop = true;
  for (auto& t : runs) t.join();
  EXPECT_EQ(alone_with_others.load(), 0);
  EXPECT_GT(most_shared.load(), 1) << "runs never overlapped";
}

TEST(DeviceGate, TwoRecordingsWaitingTogetherBothFinish) {
  DeviceGate gate;
  std::atomic<int> done{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 2; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        DeviceTurn turn(&gate, nullptr, nullptr);
        turn.alone();
      }
      ++done;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(done.load(), 2);
}

TEST(DeviceTurn, EnterAndLeaveOncePerTurnAndLeaveOnlyAfterEnter) {
  int entered = 0, left = 0;
  std::function<Status()> enter = [&] {
    ++entered;
    return Status::ok();
  };
  std::function<void()> leave = [&] { ++left; };
  {
    DeviceTurn turn(nullptr, &enter, &leave);
    EXPECT_TRUE(turn.enter().is_ok());
    turn.alone();  // no gate: nothing to wait for
  }
  EXPECT_EQ(entered, 1);
  EXPECT_EQ(left, 1);
  { DeviceTurn never_entered(nullptr, &enter, &leave); }
  EXPECT_EQ(left, 1);
  // A failing enter is returned as is.
  std::function<Status()> fails = [] { return Status::error("the device is gone"); };
  DeviceTurn turn(nullptr, &fails, nullptr);
  Status s = turn.enter();
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("gone"), std::string::npos);
}

}  // namespace
}  // namespace ferrite
