#pragma once
// comm::CommunicatorLibrary and comm::Communicator (runtime/comm/communicator.hpp) over NCCL, for
// live recovery's generations: init from a unique id, revoke, shrink to the survivors, grow by
// joiners, abort. No NCCL or CUDA type appears here.
//
// How it works:
//  - Every communicator is non-blocking (ncclConfig_t::blocking = 0). init, shrink, grow and
//    join return from NCCL at once and are polled with ncclCommGetAsyncError every millisecond
//    until ready; the Interrupt ends the wait (CommAbortedError) and the timeout too
//    (CommTimeoutError naming the rank and size), both aborting the new communicator. An NCCL
//    error aborts it and throws CommError (CommPeerError for ncclRemoteError) with
//    ncclGetErrorString and ncclGetLastError.
//  - backend() is an NcclBackend over the same ncclComm_t and state, so a revoke or abort here
//    fails its Works, and a Backend::abort there is abort() here.
//  - revoke() marks the state revoked (pending and later Works fail with CommPeerError quoting
//    the reason) and, where features().revoke, calls ncclCommRevoke; shrinking a revoked
//    communicator first waits for NCCL to report it quiescent (nccl.h on ncclCommRevoke).
//  - features() is comm::ncclFeatures of the loaded library (ncclGetVersion), capped by what the
//    headers this module was compiled against declare: ncclCommShrink needs 2.27 headers,
//    ncclCommRevoke 2.28, ncclCommGrow and ncclCommGetUniqueId 2.29. The version-gated entry
//    points are weak references, so a loaded library older than the headers disables them
//    instead of failing to load. Calls a build or library lacks throw CommUnsupportedError
//    naming both versions.
//  - adopt() of an NcclBackend (the backend initDistributed built) shares its state.
//
// Thread safety: as NcclBackend; revoke() and abort() may be called from any thread, while
// another thread waits on a Work.

#include <memory>

#include "runtime/comm/communicator.hpp"

namespace stretch::comm::nccl {

// The NCCL library whose communicators live on CUDA device `device`. Their buffers must be
// there too. A missing device is reported by init and join (CommError naming what is visible).
std::shared_ptr<CommunicatorLibrary> makeNcclLibrary(int device);
// The same for the CUDA device current on the calling thread (cuda:0 when CUDA has none).
std::shared_ptr<CommunicatorLibrary> makeNcclLibrary();

}  // namespace stretch::comm::nccl
