#include "distributed/loopback.h"

#include <condition_variable>
#include <cstring>
#include <mutex>

#include "ops/numeric_cast.h"

namespace ferrite {

namespace {

enum class Kind : uint8_t { kAllReduce, kAllGather, kReduceScatter };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kAllReduce:
      return "AllReduce";
    case Kind::kAllGather:
      return "AllGather";
    case Kind::kReduceScatter:
      return "ReduceScatter";
  }
  return "?";
}

// What one rank brought to the collective in progress.
struct Slot {
  const void* in = nullptr;
  int64_t count = 0;
  DType dtype = DType::kUndefined;
  Kind kind = Kind::kAllReduce;
};

// The state the ranks share: a reusable barrier (generation counting) and one slot per rank.
class Group {
 public:
  explicit Group(int size) : size_(size), slots_(static_cast<size_t>(size)) {}
  int size() const { return size_; }
  Slot& slot(int rank) { return slots_[static_cast<size_t>(rank)]; }

  Status barrier() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!aborted_.empty()) return err(aborted_);
    const uint64_t gen = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != gen || !aborted_.empty(); });
    }
    if (generation_ == gen) return err(aborted_);  // woken by abort before the others came
    return Status::ok();
  }

  void abort(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_.empty()) aborted_ = "collective aborted: " + reason;
    cv_.notify_all();
  }

 private:
  const int size_;
  std::vector<Slot> slots_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::string aborted_;
};

// out[i] = sum over ranks r (in rank order) of src(r)[offset + i], accumulated in T's
// arithmetic type (float for the 2-byte floats: one rounding at the end).
void sum_into(Group& g, DType dtype, int64_t offset, int64_t count, void* out) {
  visit_dtype(dtype, [&]<class T>() {
    using Acc = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float,
                                   std::conditional_t<std::is_same_v<T, bool>, int, T>>;
    T* o = static_cast<T*>(out);
    for (int64_t i = 0; i < count; ++i) {
      Acc acc = Acc(0);
      for (int r = 0; r < g.size(); ++r)
        acc += static_cast<Acc>(static_cast<const T*>(g.slot(r).in)[offset + i]);
      if constexpr (std::is_same_v<T, bool>)
        o[i] = acc != 0;  // logical or: the sum of booleans saturates at true
      else
        o[i] = static_cast<T>(acc);
    }
  });
}

class LoopbackCommunicator : public Communicator {
 public:
  LoopbackCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  std::string describe() const override {
    return str_cat("loopback rank ", rank_, " of ", group_->size());
  }

  Status all_reduce_sum(const void* in, void* out, int64_t count, DType dtype) override {
    return collective(Kind::kAllReduce, in, count, dtype,
                      [&] { sum_into(*group_, dtype, 0, count, out); });
  }
  Status all_gather(const void* in, void* out, int64_t count, DType dtype) override {
    return collective(Kind::kAllGather, in, count, dtype, [&] {
      const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
      for (int r = 0; r < size(); ++r)
        std::memcpy(static_cast<uint8_t*>(out) + bytes * static_cast<size_t>(r), group_->slot(r).in,
                    bytes);
    });
  }
  Status reduce_scatter_sum(const void* in, void* out, int64_t count, DType dtype) override {
    return collective(Kind::kReduceScatter, in, count, dtype, [&] {
      sum_into(*group_, dtype, static_cast<int64_t>(rank_) * count, count, out);
    });
  }
  void abort(const std::string& reason) override { group_->abort(reason); }

 private:
  // Deposit, wait for every rank, check they agree, compute this rank's result from the others'
  // inputs, and wait again so that no input is released while another rank still reads it.
  template <class F>
  Status collective(Kind kind, const void* in, int64_t count, DType dtype, F compute) {
    group_->slot(rank_) = {in, count, dtype, kind};
    FERRITE_RETURN_IF_ERROR(group_->barrier());
    for (int r = 0; r < size(); ++r) {
      const Slot& s = group_->slot(r);
      if (s.kind != kind || s.count != count || s.dtype != dtype) {
        std::string why =
            str_cat(describe(), ": ", kind_name(kind), " of ", count, " ", dtype_name(dtype),
                    " met ", kind_name(s.kind), " of ", s.count, " ", dtype_name(s.dtype),
                    " on rank ", r, " (the ranks' graphs disagree)");
        group_->abort(why);
        return err(why);
      }
    }
    compute();
    return group_->barrier();
  }

  std::shared_ptr<Group> group_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_loopback_group(int size) {
  auto group = std::make_shared<Group>(size);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < size; ++r) comms.push_back(std::make_unique<LoopbackCommunicator>(group, r));
  return comms;
}

}  // namespace ferrite
