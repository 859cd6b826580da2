#include "runtime/comm/staged_backend.hpp"

#include <algorithm>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "runtime/comm/errors.hpp"

namespace stretch::comm {

DeviceStaging::~DeviceStaging() = default;

// Host buffers, reused by size: an operation takes the smallest free buffer that fits (or a new
// one), and gives it back when its Work completes successfully. A buffer whose operation failed
// may still be written by the host backend (a timed-out operation keeps running), so it is never
// reused: it is freed with the Work that holds it.
class StagedBackend::Pool : public std::enable_shared_from_this<StagedBackend::Pool> {
 public:
  explicit Pool(std::shared_ptr<DeviceStaging> staging) : staging_(std::move(staging)) {}
  ~Pool() {
    for (const auto& [bytes, data] : free_)
      staging_->freeHost(data, bytes);
  }

  class Buffer {
   public:
    Buffer() = default;
    Buffer(std::shared_ptr<Pool> pool, void* data, std::size_t bytes)
        : pool_(std::move(pool)), data_(data), bytes_(bytes) {}
    Buffer(Buffer&& other) noexcept { *this = std::move(other); }
    Buffer& operator=(Buffer&& other) noexcept {
      std::swap(pool_, other.pool_);
      std::swap(data_, other.data_);
      std::swap(bytes_, other.bytes_);
      std::swap(reusable_, other.reusable_);
      return *this;
    }
    ~Buffer() {
      if (data_ != nullptr)
        pool_->giveBack(data_, bytes_, reusable_);
    }
    void* data() const noexcept { return data_; }
    void poison() noexcept { reusable_ = false; }

   private:
    std::shared_ptr<Pool> pool_;
    void* data_ = nullptr;
    std::size_t bytes_ = 0;
    bool reusable_ = true;
  };

  Buffer take(std::size_t bytes) {
    if (bytes == 0)
      return {};
    {
      std::lock_guard lock(mutex_);
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->first >= bytes && (best == free_.end() || it->first < best->first))
          best = it;
      }
      if (best != free_.end()) {
        const auto [size, data] = *best;
        free_.erase(best);
        return Buffer(shared_from_this(), data, size);
      }
    }
    void* data = staging_->allocateHost(bytes);
    std::lock_guard lock(mutex_);
    held_ += bytes;
    return Buffer(shared_from_this(), data, bytes);
  }

  std::size_t heldBytes() const {
    std::lock_guard lock(mutex_);
    return held_;
  }

 private:
  void giveBack(void* data, std::size_t bytes, bool reusable) noexcept {
    if (reusable) {
      std::lock_guard lock(mutex_);
      free_.emplace_back(bytes, data);
      return;
    }
    staging_->freeHost(data, bytes);
    std::lock_guard lock(mutex_);
    held_ -= bytes;
  }

  std::shared_ptr<DeviceStaging> staging_;
  mutable std::mutex mutex_;
  std::vector<std::pair<std::size_t, void*>> free_;
  std::size_t held_ = 0;
};

namespace {

using Buffer = StagedBackend::Pool::Buffer;

// The host backend's Work, finished by copying the result back to the device once the host
// operation has succeeded; the host buffers go back to the pool then.
class StagedWork final : public Work {
 public:
  StagedWork(std::shared_ptr<Work> host, std::vector<Buffer> buffers,
             std::function<void()> copyBack)
      : Work(host->op(), host->timeout(), host->description() + " (staged through host memory)"),
        host_(std::move(host)),
        buffers_(std::move(buffers)),
        copyBack_(std::move(copyBack)) {}

  bool isCompleted() override {
    if (!host_->isCompleted())
      return false;
    finish();
    return true;
  }

  void wait(std::optional<Duration> timeout) override {
    try {
      host_->wait(timeout);
    } catch (...) {
      // Failed, or still running after the timeout: the host backend may write the buffers yet.
      std::lock_guard lock(mutex_);
      for (Buffer& buffer : buffers_)
        buffer.poison();
      throw;
    }
    finish();
    std::lock_guard lock(mutex_);
    if (error_)
      std::rethrow_exception(error_);
  }

  std::exception_ptr exception() override {
    if (auto failed = host_->exception())
      return failed;
    if (!host_->isCompleted())
      return nullptr;
    finish();
    std::lock_guard lock(mutex_);
    return error_;
  }

 private:
  void finish() {
    std::lock_guard lock(mutex_);
    if (finished_)
      return;
    finished_ = true;
    if (host_->exception()) {
      for (Buffer& buffer : buffers_)
        buffer.poison();
      return;
    }
    try {
      if (copyBack_)
        copyBack_();
    } catch (...) {
      error_ = std::current_exception();
    }
    buffers_.clear();
  }

  std::shared_ptr<Work> host_;
  std::vector<Buffer> buffers_;
  std::function<void()> copyBack_;
  std::mutex mutex_;
  bool finished_ = false;
  std::exception_ptr error_;
};

BufferView onHost(const BufferView& device, const Buffer& buffer) {
  return BufferView{buffer.data(), device.count, device.dtype, Device::cpu()};
}

}  // namespace

StagedBackend::StagedBackend(std::shared_ptr<Backend> host, std::shared_ptr<DeviceStaging> staging)
    : StagedBackend(host, staging, std::make_shared<Pool>(staging)) {}

StagedBackend::StagedBackend(std::shared_ptr<Backend> host, std::shared_ptr<DeviceStaging> staging,
                             std::shared_ptr<Pool> pool)
    : host_(std::move(host)), staging_(std::move(staging)), pool_(std::move(pool)) {
  if (!host_ || !staging_)
    throw CommError("staged backend: a host backend and a device staging are both needed");
  if (!host_->supportsDevice(DeviceType::Cpu)) {
    throw CommError(
        fmt::format("staged backend: host backend {} does not serve CPU buffers", host_->name()));
  }
  name_ = fmt::format("{} staged", host_->name());
}

StagedBackend::~StagedBackend() = default;

bool StagedBackend::supportsDevice(DeviceType type) const noexcept {
  return type == staging_->device();
}

void StagedBackend::checkDevice(OpType op, const BufferView& buffer, std::string_view role,
                                const BufferView* output) const {
  if (buffer.count > 0 && buffer.device.type != staging_->device()) {
    throw CommError(
        fmt::format("{}: {} buffer is on {}: expected {} (this backend stages {} "
                    "buffers through host memory)",
                    describe(op, &buffer), role, buffer.device.toString(),
                    toString(staging_->device()), toString(staging_->device())));
  }
  if (output != nullptr)
    checkDevice(op, *output, "output");  // the shapes are the host backend's to check
}

namespace {
// The shape of the operations on one buffer: staged in when `copyIn`, the result copied back
// when `copyOut`.
template <typename Issue>
std::shared_ptr<Work> stagedOne(StagedBackend::Pool& pool,
                                const std::shared_ptr<DeviceStaging>& staging,
                                const BufferView& buffer, bool copyIn, bool copyOut,
                                Issue&& issue) {
  Buffer host = pool.take(buffer.bytes());
  if (copyIn && buffer.count > 0)
    staging->toHost(host.data(), buffer);
  auto work = issue(onHost(buffer, host));
  std::function<void()> copyBack;
  if (copyOut && buffer.count > 0) {
    copyBack = [staging, buffer, data = host.data()] { staging->toDevice(buffer, data); };
  }
  std::vector<Buffer> held;
  held.push_back(std::move(host));
  return std::make_shared<StagedWork>(std::move(work), std::move(held), std::move(copyBack));
}

// The shape of the collectives with an input and an output buffer.
template <typename Issue>
std::shared_ptr<Work> stagedInOut(StagedBackend::Pool& pool,
                                  const std::shared_ptr<DeviceStaging>& staging,
                                  const BufferView& input, const BufferView& output,
                                  Issue&& issue) {
  Buffer in = pool.take(input.bytes());
  Buffer out = pool.take(output.bytes());
  if (input.count > 0)
    staging->toHost(in.data(), input);
  auto work = issue(onHost(input, in), onHost(output, out));
  std::function<void()> copyBack;
  if (output.count > 0)
    copyBack = [staging, output, data = out.data()] { staging->toDevice(output, data); };
  std::vector<Buffer> held;
  held.push_back(std::move(in));
  held.push_back(std::move(out));
  return std::make_shared<StagedWork>(std::move(work), std::move(held), std::move(copyBack));
}
}  // namespace

std::shared_ptr<Work> StagedBackend::allReduce(BufferView buffer, ReduceOp op,
                                               const CollectiveOptions& options) {
  checkDevice(OpType::AllReduce, buffer, "the");
  return stagedOne(*pool_, staging_, buffer, true, true,
                   [&](BufferView host) { return host_->allReduce(host, op, options); });
}

std::shared_ptr<Work> StagedBackend::broadcast(BufferView buffer, int root,
                                               const CollectiveOptions& options) {
  checkDevice(OpType::Broadcast, buffer, "the");
  checkRoot(OpType::Broadcast, root);
  // The root sends and keeps its buffer; the others only receive.
  const bool sends = rank() == root;
  return stagedOne(*pool_, staging_, buffer, sends, !sends,
                   [&](BufferView host) { return host_->broadcast(host, root, options); });
}

std::shared_ptr<Work> StagedBackend::allGather(BufferView input, BufferView output,
                                               const CollectiveOptions& options) {
  checkDevice(OpType::AllGather, input, "input", &output);
  return stagedInOut(*pool_, staging_, input, output, [&](BufferView in, BufferView out) {
    return host_->allGather(in, out, options);
  });
}

std::shared_ptr<Work> StagedBackend::reduceScatter(BufferView input, BufferView output, ReduceOp op,
                                                   const CollectiveOptions& options) {
  checkDevice(OpType::ReduceScatter, input, "input", &output);
  return stagedInOut(*pool_, staging_, input, output, [&](BufferView in, BufferView out) {
    return host_->reduceScatter(in, out, op, options);
  });
}

std::shared_ptr<Work> StagedBackend::allToAll(BufferView input, BufferView output,
                                              const CollectiveOptions& options) {
  checkDevice(OpType::AllToAll, input, "input", &output);
  return stagedInOut(*pool_, staging_, input, output, [&](BufferView in, BufferView out) {
    return host_->allToAll(in, out, options);
  });
}

std::shared_ptr<Work> StagedBackend::send(BufferView buffer, int peer, int tag,
                                          const CollectiveOptions& options) {
  checkDevice(OpType::Send, buffer, "the");
  return stagedOne(*pool_, staging_, buffer, true, false,
                   [&](BufferView host) { return host_->send(host, peer, tag, options); });
}

std::shared_ptr<Work> StagedBackend::recv(BufferView buffer, int peer, int tag,
                                          const CollectiveOptions& options) {
  checkDevice(OpType::Recv, buffer, "the");
  return stagedOne(*pool_, staging_, buffer, false, true,
                   [&](BufferView host) { return host_->recv(host, peer, tag, options); });
}

std::shared_ptr<Work> StagedBackend::barrier(const CollectiveOptions& options) {
  return host_->barrier(options);
}

void StagedBackend::abort(std::string_view reason) {
  host_->abort(reason);
}

std::shared_ptr<Backend> StagedBackend::createSubgroup(const std::vector<int>& ranks,
                                                       const std::string& groupName) {
  return withHost(host_->createSubgroup(ranks, groupName));
}

std::shared_ptr<StagedBackend> StagedBackend::withHost(std::shared_ptr<Backend> host) const {
  return std::shared_ptr<StagedBackend>(new StagedBackend(std::move(host), staging_, pool_));
}

std::size_t StagedBackend::pooledBytes() const {
  return pool_->heldBytes();
}

}  // namespace stretch::comm
