#pragma once
// Typed errors of the communication layer. Every message names the backend or store, the
// operation, the rank and what was expected, so that a failure in a 1000-rank job can be traced
// from one log line.

#include "runtime/common/error.hpp"

namespace stretch::comm {

// A collective or point-to-point operation failed (bad arguments, transport error).
STRETCH_DECLARE_ERROR(CommError, Error);
// An operation or rendezvous did not finish within its timeout.
STRETCH_DECLARE_ERROR(CommTimeoutError, CommError);
// A peer went away (connection closed or reset) during an operation.
STRETCH_DECLARE_ERROR(CommPeerError, CommError);
// The backend does not implement this operation, data type or device.
STRETCH_DECLARE_ERROR(CommUnsupportedError, CommError);
// A blocking call was interrupted by its caller (comm::Interrupt: live recovery's generation was
// superseded) before it finished.
STRETCH_DECLARE_ERROR(CommAbortedError, CommError);
// A key-value store failed: unreachable server, rejected client, oversized key or value.
STRETCH_DECLARE_ERROR(StoreError, CommError);
// A store wait or get did not see its keys within the timeout.
STRETCH_DECLARE_ERROR(StoreTimeoutError, StoreError);
// initDistributed could not work out rank, world size or master from its arguments and the
// environment, or they contradict each other.
STRETCH_DECLARE_ERROR(DistributedInitError, ConfigError);

}  // namespace stretch::comm
