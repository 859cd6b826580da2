#pragma once
// An in-process sim::ReplicaGroup for tests: K threads, one per rank, exchange through shared
// memory, so code written for `mpirun -n K` runs without MPI. Every allGather waits at most 60 s
// for the other ranks, then throws instead of hanging the test.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sim/replica_group.hpp"

namespace stretch::test {

class ThreadWorld {
 public:
  explicit ThreadWorld(int size) : size_(size), slots_(static_cast<std::size_t>(size)) {}

  std::vector<std::string> allGather(int rank, const std::string& mine) {
    std::unique_lock lock(mutex_);
    const std::uint64_t round = round_;
    slots_[static_cast<std::size_t>(rank)] = mine;
    if (++arrived_ == size_) {
      gathered_ = slots_;
      arrived_ = 0;
      ++round_;
      changed_.notify_all();
      return gathered_;
    }
    if (!changed_.wait_for(lock, std::chrono::seconds(60), [&] { return round_ != round; })) {
      throw std::runtime_error("ThreadWorld: the other ranks never joined the exchange");
    }
    return gathered_;
  }
  int size() const noexcept { return size_; }

 private:
  int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> slots_;
  std::vector<std::string> gathered_;
  int arrived_ = 0;
  std::uint64_t round_ = 0;
};

class ThreadRank final : public sim::ReplicaGroup {
 public:
  ThreadRank(ThreadWorld& world, int rank) : world_(world), rank_(rank) {}
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return world_.size(); }
  std::vector<std::string> allGather(const std::string& mine) override {
    return world_.allGather(rank_, mine);
  }

 private:
  ThreadWorld& world_;
  int rank_;
};

// Runs body(group) on `size` threads, one rank each; returns when all have.
inline void runRanks(int size, const std::function<void(sim::ReplicaGroup&)>& body) {
  ThreadWorld world(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&world, &body, r] {
      ThreadRank rank(world, r);
      body(rank);
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
}

}  // namespace stretch::test
