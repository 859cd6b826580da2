#pragma once
// The transport a collective algorithm runs over (runtime/comm/collectives/algorithms.hpp), after
// gloo's split of algorithms from transport: buffers registered for one operation, non-blocking
// sends and receives on them, and a wait per completed message. A backend implements it over
// its own transport (the Gloo backend over Gloo's unbound buffers); the algorithms never see a
// transport type, so this header and they carry no third-party headers.
//
// Contract:
//  - One Channel serves one operation on one rank. Every rank of the group runs the same
//    algorithm with the same arguments (up to the data), so slots and message orders agree.
//  - Buffer::send(peer, slot, offset, bytes) sends bytes [offset, offset + bytes) of the buffer
//    to `peer`; Buffer::recv(peer, slot, offset, bytes) receives the message `peer` sent with the
//    same slot into [offset, offset + bytes). Messages between a pair with the same slot match in
//    posting order, and a receive must be exactly as large as its send. Both only post: call them
//    inside a closure given to post(), never directly.
//  - waitSend(buffer) / waitRecv(buffer) return once one more send / receive posted on that
//    buffer has completed (any of them); call each once per posted message. They throw (the
//    backend's own error: timeout, broken peer, abort) instead of returning when the operation
//    cannot complete; the algorithm then unwinds and the channel cleans up.
//  - A buffer's memory must stay valid and, for sends, unchanged until its wait has returned.
//
// Threads: an algorithm calls the Channel from one thread; closures given to post() may run on
// another (the transport's I/O thread) but run in posting order.

#include <cstddef>
#include <cstdint>
#include <functional>

namespace stretch::comm::collectives {

class Channel {
 public:
  // Memory registered with the transport for the current operation.
  class Buffer {
   public:
    virtual ~Buffer() = default;
    virtual void send(int peer, std::uint64_t slot, std::size_t offset, std::size_t bytes) = 0;
    virtual void recv(int peer, std::uint64_t slot, std::size_t offset, std::size_t bytes) = 0;
  };

  virtual ~Channel() = default;

  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;

  // Registers `bytes` bytes at `data`; the Buffer is owned by the channel and valid until the
  // operation ends.
  virtual Buffer* buffer(void* data, std::size_t bytes) = 0;
  // Scratch memory owned by the backend, valid until the next call (for this operation only).
  virtual std::byte* scratch(std::size_t bytes) = 0;
  // A fresh block of 256 consecutive slots (slot, slot + 1, ..., slot + 255), identical on every
  // rank because every rank runs the same operations in the same order.
  virtual std::uint64_t nextSlot() = 0;
  // Runs `fn` (which calls Buffer::send/recv) soon, in posting order. `fn` may throw the
  // transport's errors; the next wait then rethrows.
  virtual void post(std::function<void()> fn) = 0;

  virtual void waitSend(Buffer* buffer) = 0;
  virtual void waitRecv(Buffer* buffer) = 0;
};

}  // namespace stretch::comm::collectives
