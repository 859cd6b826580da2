#include "sim/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace stretch::sim {

int parallelFor(std::int64_t count, int threads, const std::function<void(std::int64_t)>& work,
                const std::function<void(std::int64_t, std::int64_t)>& done) {
  if (count <= 0) {
    return 0;
  }
  int used =
      threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  used = static_cast<int>(std::min<std::int64_t>(used, count));

  std::atomic<std::int64_t> next{0};
  std::int64_t finished = 0;  // guarded by mutex
  std::mutex mutex;           // serialises done() and guards the first error
  std::exception_ptr firstError;
  std::int64_t firstErrorItem = count;
  auto fail = [&](std::int64_t item) {
    std::lock_guard lock(mutex);
    if (item < firstErrorItem) {
      firstErrorItem = item;
      firstError = std::current_exception();
    }
    next.store(count);  // stop handing out work
  };
  auto worker = [&] {
    while (true) {
      const std::int64_t item = next.fetch_add(1);
      if (item >= count) {
        return;
      }
      try {
        work(item);
      } catch (...) {
        fail(item);
        continue;
      }
      if (done) {
        try {
          // Counted under the lock, so done() sees 1, 2, 3, ... in order (a count taken before
          // the lock let a later thread report n + 1 before n).
          std::lock_guard lock(mutex);
          done(++finished, count);
        } catch (...) {
          fail(item);
        }
      }
    }
  };
  if (used == 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    pool.reserve(static_cast<std::size_t>(used));
    for (int t = 0; t < used; ++t) {
      pool.emplace_back(worker);
    }
    for (auto& t : pool) {
      t.join();
    }
  }
  if (firstError) {
    std::rethrow_exception(firstError);
  }
  return used;
}

}  // namespace stretch::sim
