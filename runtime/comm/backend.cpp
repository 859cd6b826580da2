#include "runtime/comm/backend.hpp"

#include <fmt/format.h>

#include "runtime/comm/errors.hpp"

namespace stretch::comm {

Backend::~Backend() = default;

std::shared_ptr<Work> Backend::allReduce(BufferView, ReduceOp, const CollectiveOptions&) {
  throwUnsupported(OpType::AllReduce);
}
std::shared_ptr<Work> Backend::broadcast(BufferView, int, const CollectiveOptions&) {
  throwUnsupported(OpType::Broadcast);
}
std::shared_ptr<Work> Backend::allGather(BufferView, BufferView, const CollectiveOptions&) {
  throwUnsupported(OpType::AllGather);
}
std::shared_ptr<Work> Backend::reduceScatter(BufferView, BufferView, ReduceOp,
                                             const CollectiveOptions&) {
  throwUnsupported(OpType::ReduceScatter);
}
std::shared_ptr<Work> Backend::allToAll(BufferView, BufferView, const CollectiveOptions&) {
  throwUnsupported(OpType::AllToAll);
}
std::shared_ptr<Work> Backend::send(BufferView, int, int, const CollectiveOptions&) {
  throwUnsupported(OpType::Send);
}
std::shared_ptr<Work> Backend::recv(BufferView, int, int, const CollectiveOptions&) {
  throwUnsupported(OpType::Recv);
}
std::shared_ptr<Work> Backend::barrier(const CollectiveOptions&) {
  throwUnsupported(OpType::Barrier);
}

void Backend::abort(std::string_view) {}

std::shared_ptr<Backend> Backend::createSubgroup(const std::vector<int>&, const std::string&) {
  throwUnsupportedSubgroups();
}

std::string Backend::describe(OpType op, const BufferView* buffer) const {
  if (buffer == nullptr)
    return fmt::format("{} {} on rank {} of {}", name(), toString(op), rank(), size());
  return fmt::format("{} {} of {} x {} on rank {} of {}", name(), toString(op), buffer->count,
                     toString(buffer->dtype), rank(), size());
}

void Backend::throwUnsupported(OpType op, std::string_view why) const {
  throw CommUnsupportedError(fmt::format("backend {} does not support {}{}{}", name(), toString(op),
                                         why.empty() ? "" : ": ", why));
}

void Backend::throwUnsupportedSubgroups() const {
  throw CommUnsupportedError(fmt::format("backend {} does not support sub-groups", name()));
}

void Backend::checkBuffer(OpType op, const BufferView& buffer, std::string_view role) const {
  if (!supportsDevice(buffer.device.type)) {
    throwUnsupported(op, fmt::format("{} buffer is on {}; {} serves other devices", role,
                                     buffer.device.toString(), name()));
  }
  if (buffer.count > 0 && buffer.data == nullptr) {
    throw CommError(fmt::format("{}: {} buffer has {} elements but a null pointer", describe(op),
                                role, buffer.count));
  }
}

void Backend::checkRoot(OpType op, int root) const {
  if (root < 0 || root >= size()) {
    throw CommError(
        fmt::format("{}: root = {}: expected a rank in [0, {})", describe(op), root, size()));
  }
}

void Backend::checkPeer(OpType op, int peer) const {
  if (peer < 0 || peer >= size() || peer == rank()) {
    throw CommError(fmt::format("{}: peer = {}: expected a rank in [0, {}) other than {}",
                                describe(op), peer, size(), rank()));
  }
}

namespace {
void checkSameType(const Backend& backend, OpType op, const BufferView& input,
                   const BufferView& output) {
  if (input.dtype != output.dtype) {
    throw CommError(fmt::format("{} {} on rank {}: output dtype = {}: expected the input's {}",
                                backend.name(), toString(op), backend.rank(),
                                toString(output.dtype), toString(input.dtype)));
  }
}
}  // namespace

void Backend::checkAllGather(const BufferView& input, const BufferView& output) const {
  checkBuffer(OpType::AllGather, input, "input");
  checkBuffer(OpType::AllGather, output, "output");
  checkSameType(*this, OpType::AllGather, input, output);
  const std::size_t expected = input.count * static_cast<std::size_t>(size());
  if (output.count != expected) {
    throw CommError(fmt::format("{}: output count = {}: expected input count x world size = {}",
                                describe(OpType::AllGather, &input), output.count, expected));
  }
}

void Backend::checkReduceScatter(const BufferView& input, const BufferView& output) const {
  checkBuffer(OpType::ReduceScatter, input, "input");
  checkBuffer(OpType::ReduceScatter, output, "output");
  checkSameType(*this, OpType::ReduceScatter, input, output);
  const std::size_t expected = output.count * static_cast<std::size_t>(size());
  if (input.count != expected) {
    throw CommError(fmt::format("{}: input count = {}: expected output count x world size = {}",
                                describe(OpType::ReduceScatter, &input), input.count, expected));
  }
}

void Backend::checkAllToAll(const BufferView& input, const BufferView& output) const {
  checkBuffer(OpType::AllToAll, input, "input");
  checkBuffer(OpType::AllToAll, output, "output");
  checkSameType(*this, OpType::AllToAll, input, output);
  if (output.count != input.count) {
    throw CommError(fmt::format("{}: output count = {}: expected the input count {}",
                                describe(OpType::AllToAll, &input), output.count, input.count));
  }
  if (input.count % static_cast<std::size_t>(size()) != 0) {
    throw CommError(fmt::format("{}: input count = {}: expected a multiple of the world size {}",
                                describe(OpType::AllToAll, &input), input.count, size()));
  }
}

}  // namespace stretch::comm
