#pragma once
// Stretch's CPU collective algorithms, written over the send/recv Channel of channel.hpp so that
// a backend supplies only the transport (the Gloo backend wires them to Gloo's TCP pairs).
//
// Every function runs one operation to completion on the calling thread, with the same arguments
// (up to the data) on every rank of the channel, and throws whatever the channel's waits throw.
// Callers check shapes and roots first (Backend::check*) and handle zero-count buffers and
// groups of one themselves: these expect count > 0 and size() >= 2.
//
// Reductions use runtime/comm/reduce.hpp, so every DataType and ReduceOp works; Avg is a Sum
// divided by the group size at the end. all_reduce results are bit-identical on every rank.
//
// Which algorithm runs:
//  - allReduce: recursive doubling while bytes x log2(n) <= 512 KiB; above that, one round of
//    direct reduce-scatter then one of direct all-gather (each byte crosses 2(n-1)/n times), in
//    pieces that bound the scratch memory to 32 MiB.
//  - broadcast: direct sends from the root; from 1 MiB on with 3+ ranks, scatter then
//    all-gather, so the root sends ~2x the buffer instead of (n-1)x.
//  - allGather, reduceScatter, allToAll: one round of direct messages to every peer
//    (reduceScatter in pieces of at most 32 MiB of scratch).
//  - barrier: dissemination, ceil(log2 n) rounds of one-byte messages.

#include <cstddef>

#include "runtime/comm/collectives/channel.hpp"
#include "runtime/comm/types.hpp"

namespace stretch::comm::collectives {

// In place on `count` elements of `dtype` at `data`.
void allReduce(Channel& channel, void* data, std::size_t count, DataType dtype, ReduceOp op);
// In place: the root's `count` elements of `dtype` at `data` land on every rank.
void broadcast(Channel& channel, void* data, std::size_t count, DataType dtype, int root);
// Shapes as in runtime/comm/backend.hpp; input and output may be the same memory.
void allGather(Channel& channel, const BufferView& input, const BufferView& output);
void reduceScatter(Channel& channel, const BufferView& input, const BufferView& output,
                   ReduceOp op);
// input and output may overlap (the input is copied to scratch first).
void allToAll(Channel& channel, const BufferView& input, const BufferView& output);
void barrier(Channel& channel);

}  // namespace stretch::comm::collectives
