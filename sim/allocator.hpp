#pragma once
// glibc malloc tuning for simulation processes. Every restart of a simulated world builds and
// drops a few node-sized vectors (the StartWorkers action and its copies: about 1 MB at 16,384
// nodes); with glibc's defaults each such block is mmap'ed and unmapped, or trimmed off the heap
// top, so a 131,072-GPU month spent more time in page faults than in the agent (6.9 s against
// 2.5 s with the tuning). Executables that simulate (stretch sim, stretch plan, the benchmarks)
// call this once at start; the library itself never changes process-wide settings.
namespace stretch::sim {

// Keeps blocks up to 64 MiB on the heap, grows it 256 MiB at a time and keeps up to 256 MiB of
// free heap top (the growth step is what stops the page-fault churn). No-op without glibc.
void tuneAllocatorForSimulation() noexcept;

}  // namespace stretch::sim
