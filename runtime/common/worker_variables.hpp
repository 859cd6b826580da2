#pragma once
// The environment variables of Stretch's worker contract, by name: what `stretch launch` and the
// node agents set for every worker (runtime/launcher/worker_env.cpp), and what the engine, the
// example jobs and the elasticity runtime read back. One list, so that a name is spelled once;
// docs/launch.md ("What a worker gets") describes their values. PyTorch's own variables (RANK,
// WORLD_SIZE, MASTER_ADDR, ...) keep their usual names and are not listed here.

#include <csignal>

namespace stretch::worker_env {

// The signal the agent sends a survivor's process group when a live generation it belongs to is
// published (join it at the next step boundary). Workers start with it ignored (a wrapper such as
// `sh -c`, or a program that does not speak the protocol, is not killed by it); the engine and
// stretch.torch install their handlers.
inline constexpr int kLiveSignal = SIGUSR1;

// A worker's exit status that says the job cannot run as launched, whatever restarts would do
// (another job holds its checkpoint directory): the agent ends the job at once with exit status
// 2 and the worker's reason, with no restart (agent/state_machine.hpp). 78 is sysexits.h's
// EX_CONFIG.
inline constexpr int kExitCannotRun = 78;
// A worker's exit status that says a checkpoint save failed (a full disk, a directory it cannot
// write): the agent counts it toward the crash-loop rule like a failure before the first step,
// because every restart would train to the same save and fail there again. 73 is sysexits.h's
// EX_CANTCREAT (74, EX_IOERR, is the launcher's own status for output it could not write).
inline constexpr int kExitSaveFailed = 73;

// The batch contract: the elastic solver's triple for the generation's world size, and the
// DeepSpeed config file (DeepSpeed's elasticity section travels in kElasticityConfig).
inline constexpr const char* kTrainBatchSize = "STRETCH_TRAIN_BATCH_SIZE";
inline constexpr const char* kMicroBatchSize = "STRETCH_MICRO_BATCH_SIZE";
inline constexpr const char* kGradientAccumulationSteps = "STRETCH_GRADIENT_ACCUMULATION_STEPS";
inline constexpr const char* kDsConfig = "STRETCH_DS_CONFIG";
inline constexpr const char* kElasticityConfig = "STRETCH_ELASTICITY_CONFIG";
// The agent's generation, restarts so far and allowed.
inline constexpr const char* kGeneration = "STRETCH_GENERATION";
inline constexpr const char* kRestartCount = "STRETCH_RESTART_COUNT";
inline constexpr const char* kMaxRestarts = "STRETCH_MAX_RESTARTS";
// The job's store: its token, and the collectives' timeout in seconds.
inline constexpr const char* kStoreToken = "STRETCH_STORE_TOKEN";
inline constexpr const char* kTimeout = "STRETCH_TIMEOUT";
// Live recovery (runtime/engine/live_recovery.hpp): the agent's store, this worker's node, the
// live generation it starts in (or waits for), whether it joins a running job, and the longest
// wait for a generation in seconds.
inline constexpr const char* kAgentStore = "STRETCH_AGENT_STORE";
inline constexpr const char* kNodeId = "STRETCH_NODE_ID";
inline constexpr const char* kLiveGeneration = "STRETCH_LIVE_GENERATION";
inline constexpr const char* kLiveJoin = "STRETCH_LIVE_JOIN";
inline constexpr const char* kLiveTimeout = "STRETCH_LIVE_TIMEOUT";
// Hang detection (runtime/engine/heartbeat.hpp): the file this worker rewrites with its last
// completed step, at least once per step.
inline constexpr const char* kHeartbeatFile = "STRETCH_HEARTBEAT_FILE";
// Step timings (one line per step) for tests and benchmarks.
inline constexpr const char* kTimingsFile = "STRETCH_TIMINGS_FILE";
// Fault injection in the example jobs, for tests.
inline constexpr const char* kFaultDir = "STRETCH_FAULT_DIR";
inline constexpr const char* kFaultKillAtStep = "STRETCH_FAULT_KILL_AT_STEP";
inline constexpr const char* kFaultPauseAtSteps = "STRETCH_FAULT_PAUSE_AT_STEPS";
inline constexpr const char* kFaultKillDuringSave = "STRETCH_FAULT_KILL_DURING_SAVE";

}  // namespace stretch::worker_env
