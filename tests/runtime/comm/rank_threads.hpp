#pragma once
// Runs one function per rank on its own thread and rethrows the first failure, so tests read
// like SPMD programs.

#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace stretch::comm::test {

inline void runRanks(int size, const std::function<void(int rank)>& body) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (auto& e : errors) {
    if (e)
      std::rethrow_exception(e);
  }
}

}  // namespace stretch::comm::test
