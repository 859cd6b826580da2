// GlooBackend's construction (the shared Gloo device, the rendezvous over a comm::Store,
// sub-groups) and its public operations: argument checks on the caller's thread, then the work
// handed to the worker (gloo_backend_worker.cpp). The private state is in gloo_backend_detail.hpp.

#include "runtime/comm/gloo/gloo_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <signal.h>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gloo/config.h>
#include <gloo/context.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/device.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>

#include "runtime/comm/collectives/algorithms.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/gloo/gloo_backend_detail.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/comm/work.hpp"

namespace stretch::comm::gloo {
namespace {

using namespace detail;

// Gloo writes to sockets with plain write(2): a write to a peer that died raises SIGPIPE, whose
// default action kills the process (Python ignores SIGPIPE, which is why PyTorch users never see
// this). Every thread that may write through Gloo blocks it instead, so the write fails with
// EPIPE and becomes a CommPeerError. Threads inherit the mask, so blocking it around the
// device's creation covers Gloo's own I/O thread.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &previous_);
  }
  // Restores the mask, first discarding a SIGPIPE raised while blocked (it would kill us on
  // unblocking).
  ~SigpipeBlock() {
    if (sigismember(&previous_, SIGPIPE) == 1)
      return;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    const timespec zero{0, 0};
    while (sigtimedwait(&set, nullptr, &zero) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t previous_;
};

// gloo::rendezvous::Store over a comm::Store; every wait ends at the rendezvous deadline.
class StoreAdapter final : public ::gloo::rendezvous::Store {
 public:
  StoreAdapter(std::shared_ptr<comm::Store> store, Clock::time_point deadline)
      : store_(std::move(store)), deadline_(deadline) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    store_->wait({key}, remainingUntil(deadline_));
    const std::string value = store_->get(key);
    return {value.begin(), value.end()};
  }
  void wait(const std::vector<std::string>& keys) override {
    store_->wait(keys, remainingUntil(deadline_));
  }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, std::min(timeout, remainingUntil(deadline_)));
  }

 private:
  std::shared_ptr<comm::Store> store_;
  Clock::time_point deadline_;
};

// One device (one Gloo I/O thread) per host address and process.
std::shared_ptr<IoThread> sharedIoThread(const std::string& host) {
  static std::mutex mutex;
  static std::map<std::string, std::pair<pid_t, std::weak_ptr<IoThread>>> cache;
  std::lock_guard lock(mutex);
  auto& entry = cache[host];
  // A forked child must not use its parent's device: its I/O thread does not exist here.
  if (entry.first == ::getpid()) {
    if (auto existing = entry.second.lock())
      return existing;
  }
  std::shared_ptr<::gloo::transport::Device> device;
  try {
    ::gloo::transport::tcp::attr attr;
    attr.hostname = host;
    const SigpipeBlock noSigpipe;  // inherited by Gloo's I/O thread
    device = ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw CommError(
        fmt::format("gloo: cannot create a TCP device on host '{}': {}", host, glooMessage(e)));
  }
  auto io = std::make_shared<IoThread>(std::move(device));
  entry = {::getpid(), io};
  return io;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Construction.

namespace {

std::string joinedRanks(comm::Store& store, int size, bool joined) {
  std::string out;
  for (int r = 0; r < size; ++r) {
    bool has = false;
    try {
      has = store.check({fmt::format("joined/{}", r)});
    } catch (...) {
    }
    if (has == joined)
      out += (out.empty() ? "" : ", ") + std::to_string(r);
  }
  return out.empty() ? "none" : out;
}

std::shared_ptr<GlooBackend::Impl> connectGroup(std::shared_ptr<IoThread> io,
                                                std::shared_ptr<comm::Store> groupStore, int rank,
                                                int size, Duration timeout, std::string groupName,
                                                std::string host) {
  if (!groupStore)
    throw CommError(fmt::format("gloo group '{}': no store given", groupName));
  if (size < 1 || rank < 0 || rank >= size) {
    throw CommError(fmt::format("gloo group '{}': rank = {}, size = {}: expected 0 <= rank < size",
                                groupName, rank, size));
  }
  auto impl = std::make_shared<GlooBackend::Impl>();
  impl->io = std::move(io);
  impl->store = groupStore;
  impl->rank = rank;
  impl->size = size;
  impl->timeout = timeout;
  impl->groupName = std::move(groupName);
  impl->host = std::move(host);

  const auto deadline = Clock::now() + timeout;
  auto glooStore = std::make_shared<PrefixStore>("gloo", groupStore);
  auto context = std::make_shared<::gloo::rendezvous::Context>(rank, size);
  // Gloo waits five times its context timeout for a pair to connect (tcp::Pair::waitUntil):
  // with the full timeout, a member that published its address and then died or froze held
  // the others' rendezvous for 5 x 20 s, long after the rest of the job had given the group
  // up. A fifth of it bounds the connect to the timeout the caller asked for. Operations carry
  // their own deadlines, so the pairs' shorter timeout is used for nothing else.
  context->setTimeout(std::max(
      std::chrono::milliseconds(1),
      std::chrono::duration_cast<std::chrono::milliseconds>(timeout) / kGlooConnectTimeoutFactor));
  const std::string what =
      fmt::format("gloo rendezvous of group '{}' on rank {} of {}", impl->groupName, rank, size);
  try {
    glooStore->set(fmt::format("joined/{}", rank), "1");
    StoreAdapter adapter(glooStore, deadline);
    const SigpipeBlock noSigpipe;
    context->connectFullMesh(adapter, impl->io->device());
  } catch (const StoreTimeoutError& e) {
    throw CommTimeoutError(
        fmt::format("{} did not complete within {}: ranks joined: {}; missing: "
                    "{} ({})",
                    what, formatDuration(timeout), joinedRanks(*glooStore, size, true),
                    joinedRanks(*glooStore, size, false), e.what()));
  } catch (...) {
    std::rethrow_exception(translateError(std::current_exception(), what, timeout));
  }
  impl->context = std::move(context);
  impl->start();
  return impl;
}

}  // namespace

GlooBackend::GlooBackend(const BackendInit& init)
    : impl_(connectGroup(sharedIoThread(init.host), init.store, init.rank, init.size, init.timeout,
                         init.groupName, init.host)) {}

GlooBackend::GlooBackend(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

GlooBackend::~GlooBackend() {
  if (impl_)
    impl_->shutdown();
}

int GlooBackend::rank() const noexcept {
  return impl_->rank;
}
int GlooBackend::size() const noexcept {
  return impl_->size;
}
Duration GlooBackend::defaultTimeout() const noexcept {
  return impl_->timeout;
}
const std::string& GlooBackend::groupName() const noexcept {
  return impl_->groupName;
}
bool GlooBackend::isBroken() const {
  return impl_->isBroken();
}

// ---------------------------------------------------------------------------------------------
// Operations: argument checks on the caller's thread, the work on the worker.

std::shared_ptr<Work> GlooBackend::allReduce(BufferView buffer, ReduceOp op,
                                             const CollectiveOptions& options) {
  checkBuffer(OpType::AllReduce, buffer, "input");
  if (buffer.count == 0 || size() == 1)
    return completedWork(OpType::AllReduce, describe(OpType::AllReduce, &buffer));
  return impl_->enqueue({OpType::AllReduce, describe(OpType::AllReduce, &buffer),
                         timeoutOf(options), buffer.bytes(),
                         std::make_shared<CompletionWork>(OpType::AllReduce, timeoutOf(options),
                                                          describe(OpType::AllReduce, &buffer)),
                         [buffer, op](collectives::Channel& c) {
                           collectives::allReduce(c, buffer.data, buffer.count, buffer.dtype, op);
                         }});
}

std::shared_ptr<Work> GlooBackend::broadcast(BufferView buffer, int root,
                                             const CollectiveOptions& options) {
  checkBuffer(OpType::Broadcast, buffer, "input");
  checkRoot(OpType::Broadcast, root);
  const std::string what = describe(OpType::Broadcast, &buffer);
  if (buffer.count == 0 || size() == 1)
    return completedWork(OpType::Broadcast, what);
  return impl_->enqueue(
      {OpType::Broadcast, what, timeoutOf(options), buffer.bytes(),
       std::make_shared<CompletionWork>(OpType::Broadcast, timeoutOf(options), what),
       [buffer, root](collectives::Channel& c) {
         collectives::broadcast(c, buffer.data, buffer.count, buffer.dtype, root);
       }});
}

std::shared_ptr<Work> GlooBackend::allGather(BufferView input, BufferView output,
                                             const CollectiveOptions& options) {
  checkAllGather(input, output);
  const std::string what = describe(OpType::AllGather, &input);
  if (input.count == 0)
    return completedWork(OpType::AllGather, what);
  if (size() == 1) {
    if (input.data != output.data)
      std::memmove(output.data, input.data, input.bytes());
    return completedWork(OpType::AllGather, what);
  }
  return impl_->enqueue(
      {OpType::AllGather, what, timeoutOf(options), output.bytes(),
       std::make_shared<CompletionWork>(OpType::AllGather, timeoutOf(options), what),
       [input, output](collectives::Channel& c) { collectives::allGather(c, input, output); }});
}

std::shared_ptr<Work> GlooBackend::reduceScatter(BufferView input, BufferView output, ReduceOp op,
                                                 const CollectiveOptions& options) {
  checkReduceScatter(input, output);
  const std::string what = describe(OpType::ReduceScatter, &input);
  if (output.count == 0)
    return completedWork(OpType::ReduceScatter, what);
  if (size() == 1) {
    if (input.data != output.data)
      std::memmove(output.data, input.data, input.bytes());
    return completedWork(OpType::ReduceScatter, what);
  }
  return impl_->enqueue(
      {OpType::ReduceScatter, what, timeoutOf(options), input.bytes(),
       std::make_shared<CompletionWork>(OpType::ReduceScatter, timeoutOf(options), what),
       [input, output, op](collectives::Channel& c) {
         collectives::reduceScatter(c, input, output, op);
       }});
}

std::shared_ptr<Work> GlooBackend::allToAll(BufferView input, BufferView output,
                                            const CollectiveOptions& options) {
  checkAllToAll(input, output);
  const std::string what = describe(OpType::AllToAll, &input);
  if (input.count == 0)
    return completedWork(OpType::AllToAll, what);
  if (size() == 1) {
    if (input.data != output.data)
      std::memmove(output.data, input.data, input.bytes());
    return completedWork(OpType::AllToAll, what);
  }
  return impl_->enqueue(
      {OpType::AllToAll, what, timeoutOf(options), input.bytes(),
       std::make_shared<CompletionWork>(OpType::AllToAll, timeoutOf(options), what),
       [input, output](collectives::Channel& c) { collectives::allToAll(c, input, output); }});
}

std::shared_ptr<Work> GlooBackend::send(BufferView buffer, int peer, int tag,
                                        const CollectiveOptions& options) {
  checkBuffer(OpType::Send, buffer, "input");
  checkPeer(OpType::Send, peer);
  std::string what =
      fmt::format("{} to rank {} with tag {}", describe(OpType::Send, &buffer), peer, tag);
  return impl_->pointToPoint(OpType::Send, buffer, peer, tag, timeoutOf(options), std::move(what));
}

std::shared_ptr<Work> GlooBackend::recv(BufferView buffer, int peer, int tag,
                                        const CollectiveOptions& options) {
  checkBuffer(OpType::Recv, buffer, "output");
  checkPeer(OpType::Recv, peer);
  std::string what =
      fmt::format("{} from rank {} with tag {}", describe(OpType::Recv, &buffer), peer, tag);
  return impl_->pointToPoint(OpType::Recv, buffer, peer, tag, timeoutOf(options), std::move(what));
}

std::shared_ptr<Work> GlooBackend::barrier(const CollectiveOptions& options) {
  const std::string what = describe(OpType::Barrier);
  if (size() == 1)
    return completedWork(OpType::Barrier, what);
  return impl_->enqueue(
      {OpType::Barrier, what, timeoutOf(options), 0,
       std::make_shared<CompletionWork>(OpType::Barrier, timeoutOf(options), what),
       [](collectives::Channel& c) { collectives::barrier(c); }});
}

void GlooBackend::abort(std::string_view reason) {
  impl_->breakWith(std::make_exception_ptr(
      CommError(fmt::format("gloo group '{}' rank {} of {} left the group: {}", impl_->groupName,
                            rank(), size(), reason))));
}

std::shared_ptr<Backend> GlooBackend::createSubgroup(const std::vector<int>& ranks,
                                                     const std::string& groupName) {
  const std::string what = fmt::format("gloo sub-group '{}' of group '{}' on rank {} of {}",
                                       groupName, impl_->groupName, rank(), size());
  if (groupName.empty())
    throw CommError(fmt::format("{}: the group name is empty", what));
  int newRank = -1;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= size() || (i > 0 && r <= ranks[i - 1])) {
      throw CommError(fmt::format("{}: ranks[{}] = {}: expected ascending ranks in [0, {})", what,
                                  i, r, size()));
    }
    if (r == rank())
      newRank = static_cast<int>(i);
  }
  if (newRank < 0) {
    throw CommError(fmt::format("{}: this rank is not among the {} members", what, ranks.size()));
  }
  auto store = std::make_shared<PrefixStore>(groupName, impl_->store);
  return std::shared_ptr<Backend>(new GlooBackend(
      connectGroup(impl_->io, std::move(store), newRank, static_cast<int>(ranks.size()),
                   impl_->timeout, groupName, impl_->host)));
}

std::string glooVersion() {
  return fmt::format("{}.{}.{}", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
}

void registerGlooBackend() {
  registerBackend({"gloo", DeviceType::Cpu, fmt::format("Gloo {} (TCP transport)", glooVersion())},
                  [](const BackendInit& init) { return std::make_shared<GlooBackend>(init); });
}

}  // namespace stretch::comm::gloo
