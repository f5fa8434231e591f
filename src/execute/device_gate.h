// How the execution contexts of one device share it: runs go on at once (each context queues its
// work on a stream of its own), but a recording (RunCapture: a CUDA graph being captured) must
// be the only thing on the device's host side while it lasts, so that no other context's
// allocation, free or synchronisation meets the capture. Writer-preferring: once a recording
// waits, no new run enters, so a busy server cannot starve it; runs already in progress finish.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>

#include "support/status.h"

namespace ferrite {

class DeviceGate {
 public:
  // A run enters (waits while a recording holds or waits for the device).
  void enter_shared() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !alone_ && waiting_ == 0; });
    ++active_;
  }
  void exit_shared() {
    std::lock_guard<std::mutex> lock(mu_);
    --active_;
    cv_.notify_all();
  }
  // A run that entered shared becomes the only one (waits for the others to finish).
  void upgrade() {
    std::unique_lock<std::mutex> lock(mu_);
    --active_;
    ++waiting_;
    cv_.wait(lock, [&] { return active_ == 0 && !alone_; });
    --waiting_;
    alone_ = true;
  }
  void exit_alone() {
    std::lock_guard<std::mutex> lock(mu_);
    alone_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int active_ = 0;   // runs inside, shared
  int waiting_ = 0;  // runs waiting to be alone
  bool alone_ = false;
};

// One run's turn on a device, for the length of a scope: enters the gate (if any) shared, makes
// the device current through `enter` on request, and calls `leave` and leaves the gate at the end.
class DeviceTurn {
 public:
  DeviceTurn(DeviceGate* gate, const std::function<Status()>* enter,
             const std::function<void()>* leave)
      : gate_(gate), enter_(enter), leave_(leave) {
    if (gate_) gate_->enter_shared();
  }
  DeviceTurn(const DeviceTurn&) = delete;
  DeviceTurn& operator=(const DeviceTurn&) = delete;
  ~DeviceTurn() {
    if (entered_ && leave_ && *leave_) (*leave_)();
    if (!gate_) return;
    if (alone_)
      gate_->exit_alone();
    else
      gate_->exit_shared();
  }
  Status enter() {
    entered_ = true;
    return enter_ && *enter_ ? (*enter_)() : Status::ok();
  }
  // The rest of this turn has the device to itself (a recording).
  void alone() {
    if (!gate_ || alone_) return;
    gate_->upgrade();
    alone_ = true;
  }

 private:
  DeviceGate* gate_;
  const std::function<Status()>* enter_;
  const std::function<void()>* leave_;
  bool entered_ = false;
  bool alone_ = false;
};

// Points `slot` at `turn` for the length of a scope (how a model's recording finds its run's turn).
class CurrentTurn {
 public:
  CurrentTurn(DeviceTurn*& slot, DeviceTurn& turn) : slot_(slot) { slot_ = &turn; }
  CurrentTurn(const CurrentTurn&) = delete;
  CurrentTurn& operator=(const CurrentTurn&) = delete;
  ~CurrentTurn() { slot_ = nullptr; }

 private:
  DeviceTurn*& slot_;
};

}  // namespace ferrite
