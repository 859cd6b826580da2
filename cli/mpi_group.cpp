#include "cli/mpi_group.hpp"

#include <cstdint>
#include <cstdlib>
#include <vector>

#include <climits>
#include <fmt/format.h>

#ifdef STRETCH_HAVE_MPI
#include <mpi.h>
#endif

#include "runtime/common/error.hpp"

namespace stretch::cli {

namespace {

// The world size an MPI launcher announced in the environment, 0 when none did.
long launcherWorldSize() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"}) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') {
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && n > 0) {
        return n;
      }
    }
  }
  return 0;
}

#ifdef STRETCH_HAVE_MPI

void check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(rc, text, &length);
    throw IoError(fmt::format("{} failed: {}", call, std::string(text, length)));
  }
}

class MpiWorld final : public sim::ReplicaGroup {
 public:
  MpiWorld() {
    check(MPI_Init(nullptr, nullptr), "MPI_Init");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiWorld() override { MPI_Finalize(); }
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }

  std::vector<std::string> allGather(const std::string& mine) override {
    const auto n = static_cast<std::size_t>(size_);
    std::vector<std::uint64_t> sizes(n);
    const std::uint64_t own = mine.size();
    check(MPI_Allgather(&own, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD),
          "MPI_Allgather");
    std::vector<int> counts(n);
    std::vector<int> displacements(n);
    std::uint64_t total = 0;
    for (std::size_t r = 0; r < n; ++r) {
      // Every rank sees the same sizes, so every rank agrees to fail here.
      if (sizes[r] > static_cast<std::uint64_t>(INT_MAX) || total > INT_MAX - sizes[r]) {
        throw IoError(
            fmt::format("MPI: {} bytes of results exceed the 2 GiB one exchange can "
                        "carry; use fewer --seeds per run",
                        total + sizes[r]));
      }
      counts[r] = static_cast<int>(sizes[r]);
      displacements[r] = static_cast<int>(total);
      total += sizes[r];
    }
    std::string all(total, '\0');
    check(MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(),
                         counts.data(), displacements.data(), MPI_CHAR, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    std::vector<std::string> out(n);
    for (std::size_t r = 0; r < n; ++r) {
      out[r] = all.substr(static_cast<std::size_t>(displacements[r]),
                          static_cast<std::size_t>(counts[r]));
    }
    return out;
  }

 private:
  int rank_ = 0;
  int size_ = 1;
};

#endif

}  // namespace

std::unique_ptr<sim::ReplicaGroup> joinMpiWorld(const std::string& command) {
  const long size = launcherWorldSize();
  if (size <= 1) {
    return nullptr;
  }
#ifdef STRETCH_HAVE_MPI
  auto world = std::make_unique<MpiWorld>();
  if (world->size() <= 1) {
    return nullptr;
  }
  return world;
#else
  throw ConfigError(ErrorDetail{
      "mpirun", fmt::format("{} ranks", size),
      fmt::format("a stretch built with MPI to split `stretch {}` over ranks (install "
                  "libopenmpi-dev and rebuild; `stretch report` says whether MPI was found); run "
                  "one process instead",
                  command)});
#endif
}

}  // namespace stretch::cli
