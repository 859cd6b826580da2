#include "sim/replica_group.hpp"

#include <algorithm>
#include <exception>

#include <fmt/format.h>

namespace stretch::sim {

ItemBlock itemBlock(std::int64_t total, int rank, int size) noexcept {
  if (size <= 0 || total <= 0) {
    return {};
  }
  const std::int64_t base = total / size;
  const std::int64_t extra = total % size;
  ItemBlock b;
  b.count = base + (rank < extra ? 1 : 0);
  b.first = rank * base + std::min<std::int64_t>(rank, extra);
  return b;
}

ReplicaRankError::ReplicaRankError(std::string kind, int rank, const std::string& message)
    : Error(fmt::format("rank {}: {}", rank, message)), kind_(std::move(kind)), rank_(rank) {}

namespace {

// A block's bytes are prefixed with one tag byte: 'o' results follow, 'e' an error follows as
// "kind\nmessage".
constexpr char kOk = 'o';
constexpr char kFailed = 'e';

}  // namespace

std::vector<std::string> runSplit(
    ReplicaGroup& group, std::int64_t total,
    const std::function<std::string(std::int64_t first, std::int64_t count)>& run) {
  const ItemBlock block = itemBlock(total, group.rank(), group.size());
  std::string mine;
  std::exception_ptr own;
  try {
    mine = kOk + run(block.first, block.count);
  } catch (const Error& e) {
    own = std::current_exception();
    mine = fmt::format("{}{}\n{}", kFailed, e.kind(), e.what());
  } catch (const std::exception& e) {
    own = std::current_exception();
    mine = fmt::format("{}Error\n{}", kFailed, e.what());
  }
  // Every rank joins the exchange, failed or not: a rank that skipped it would hang the others.
  std::vector<std::string> blocks = group.allGather(mine);
  if (own) {
    std::rethrow_exception(own);
  }
  for (std::size_t r = 0; r < blocks.size(); ++r) {
    std::string& b = blocks[r];
    if (b.empty() || b.front() != kOk) {
      const std::string body = b.empty() ? std::string("Error\nno reply") : b.substr(1);
      const auto nl = body.find('\n');
      throw ReplicaRankError(body.substr(0, nl), static_cast<int>(r),
                             nl == std::string::npos ? body : body.substr(nl + 1));
    }
    b.erase(0, 1);
  }
  return blocks;
}

}  // namespace stretch::sim
