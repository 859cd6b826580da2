#include "examples/common/job_support.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
#include <unordered_set>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "runtime/comm/builtin/builtin_backends.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/init_distributed.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/common/posix_files.hpp"
#include "runtime/common/worker_variables.hpp"
#include "runtime/engine/checkpoint_dir.hpp"
#include "runtime/engine/checkpoint_io.hpp"
#include "runtime/engine/device_staging.hpp"

namespace stretch::examples {

CLI::Option* addJobOptions(CLI::App& app, JobOptions& options) {
  auto* config = app.add_option("--config", options.configPath, "DeepSpeed config (JSON)")
                     ->capture_default_str();
  app.add_option("--steps", options.steps, "optimizer steps to train")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", options.seed, "model initialisation and data shuffling seed")
      ->capture_default_str();
  app.add_option("--checkpoint-dir", options.checkpointDir, "directory for checkpoints");
  app.add_option("--save-at", options.saveAt,
                 "save a checkpoint after this step (needs --checkpoint-dir)")
      ->check(CLI::PositiveNumber);
  app.add_option("--save-every", options.saveEvery,
                 "save a checkpoint every N steps (needs --checkpoint-dir)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--resume", options.resume,
               "load the latest checkpoint of --checkpoint-dir first, if there is one");
  app.add_flag("--json", options.json, "print the summary as one JSON object");
  app.add_flag("--deterministic", options.deterministic,
               "deterministic kernels only, so that a run repeats bitwise on a GPU too "
               "(LibTorch's deterministic algorithms; cuBLAS's fixed workspace)");
  return config;
}

std::string checkJobOptions(const JobOptions& options) {
  if ((options.saveAt > 0 || options.saveEvery > 0 || options.resume) &&
      options.checkpointDir.empty()) {
    return "--save-at, --save-every and --resume need --checkpoint-dir";
  }
  return {};
}

void routeLogs(const JobOptions& options) {
  if (options.json) {
    spdlog::set_default_logger(spdlog::stderr_color_mt("stretch-job"));
  }
}

void setDeterminism(const JobOptions& options) {
  if (!options.deterministic)
    return;
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
}

config::DsConfig readJobConfig(const std::string& path) {
  auto parsed = config::parseConfig(readFile(path), path);
  for (const auto& w : parsed.warnings)
    spdlog::warn("{}", w);
  return std::move(parsed.config);
}

bool distributedEnvironment() {
  return std::getenv("WORLD_SIZE") != nullptr || std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

std::shared_ptr<comm::ProcessGroup> joinIfDistributed(engine::LiveRecovery* live) {
  if (!distributedEnvironment())
    return nullptr;
  comm::registerBuiltinBackends();
  // NCCL, or Gloo staged through host memory, for a CUDA job's buffers (logged once).
  const engine::JobComm job = engine::jobCommunication();
  if (live != nullptr) {
    live->setDeviceComm(job.device);
    if (live->joining())
      return live->joinGroup();
  }
  comm::InitOptions options;
  options.device = job.device;
  return comm::initDistributed(options);
}

void startTraining(engine::Engine& engine, const JobOptions& options, engine::LiveRecovery* live) {
  // One job per checkpoint directory, from the start: a directory another job holds ends this
  // job before its first step (runJob: exit status kExitCannotRun, which the launcher does not
  // restart), not at its first save after training it could not keep.
  if (!options.checkpointDir.empty())
    engine.claimCheckpointDir(options.checkpointDir);
  if (live == nullptr || !live->joining())
    resumeIfAsked(engine, options);
  if (live != nullptr)
    live->start(engine);
}

bool liveMicroStep(engine::Engine& engine, engine::LiveRecovery* live, std::int64_t steps,
                   const std::function<void()>& body) {
  try {
    body();
  } catch (const comm::CommError& e) {
    if (live == nullptr || !live->canRecover(engine))
      throw;
    spdlog::warn("live recovery: rank {} abandons step {}: {}", engine.dpRank(),
                 engine.globalSteps() + 1, e.what());
    live->recover(engine);
    return false;
  }
  if (live != nullptr && engine.globalSteps() < steps &&
      engine.microSteps() % engine.gradientAccumulationSteps() == 0 && live->announced()) {
    spdlog::info("live recovery: rank {} leaves generation {} after step {} for the next one",
                 engine.dpRank(), live->generation(), engine.globalSteps());
    live->recover(engine);
  }
  return true;
}

void resumeIfAsked(engine::Engine& engine, const JobOptions& options) {
  if (!options.resume)
    return;
  const auto loaded = engine.loadCheckpoint(options.checkpointDir);
  if (engine.dpRank() != 0)
    return;
  if (loaded) {
    spdlog::info("resumed from {} at step {} (written by {} rank(s))", loaded->path,
                 engine.globalSteps(), loaded->savedDpWorldSize);
  }
}

bool saveIfDue(engine::Engine& engine, const JobOptions& options, std::int64_t step) {
  if (options.checkpointDir.empty())
    return false;
  if (step != options.saveAt &&
      !(options.saveEvery > 0 && step % options.saveEvery == 0 && step < options.steps)) {
    return false;
  }
  try {
    engine.saveCheckpoint(options.checkpointDir);
  } catch (const engine::CheckpointDirInUseError&) {
    throw;  // the job cannot run (runJob)
  } catch (const checkpoint::CheckpointError& e) {
    throw SaveFailed(e.what());
  }
  return true;
}

FaultScript FaultScript::fromEnvironment() {
  FaultScript f;
  const char* dir = std::getenv(worker_env::kFaultDir);
  if (dir == nullptr)
    return f;
  f.dir = dir;
  if (const char* kill = std::getenv(worker_env::kFaultKillAtStep)) {
    if (std::sscanf(kill, "%ld:%ld", &f.killStep, &f.killRank) != 2)
      throw ConfigError(ErrorDetail{worker_env::kFaultKillAtStep, kill, "STEP:RANK"});
  }
  if (const char* pauses = std::getenv(worker_env::kFaultPauseAtSteps)) {
    const std::string text = pauses;
    for (std::size_t pos = 0; pos < text.size();) {
      const auto comma = std::min(text.find(',', pos), text.size());
      try {
        f.pauseSteps.push_back(std::stoll(text.substr(pos, comma - pos)));
      } catch (const std::exception&) {
        throw ConfigError(
            ErrorDetail{worker_env::kFaultPauseAtSteps, text, "comma-separated step numbers"});
      }
      pos = comma + 1;
    }
  }
  return f;
}

void FaultScript::afterStep(std::int64_t step, std::int64_t rank) const {
  if (dir.empty())
    return;
  if (step == killStep && rank == killRank) {
    const std::string marker = joinPath(dir, fmt::format("kill_{}", step));
    if (!pathExists(marker)) {
      writeFileAtomically(marker, fmt::format("{}\n", rank));
      spdlog::warn("fault script: rank {} kills itself after step {}", rank, step);
      ::kill(::getpid(), SIGKILL);
    }
  }
  if (std::find(pauseSteps.begin(), pauseSteps.end(), step) == pauseSteps.end())
    return;
  const std::string release = joinPath(dir, fmt::format("pause_{}.release", step));
  if (pathExists(release))
    return;
  if (rank == 0)
    writeFileAtomically(joinPath(dir, fmt::format("pause_{}.reached", step)), "\n");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!pathExists(release)) {
    if (std::chrono::steady_clock::now() > deadline) {
      spdlog::error("fault script: nobody released the pause at step {}", step);
      std::exit(3);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

namespace {

// The model's parameters, each tensor once (LibTorch lists a tensor registered under two names
// twice; PyTorch's parameters() does not).
std::vector<torch::Tensor> uniqueParameters(torch::nn::Module& model) {
  std::vector<torch::Tensor> out;
  std::unordered_set<const void*> seen;
  for (const auto& p : model.parameters()) {
    if (seen.insert(p.unsafeGetTensorImpl()).second)
      out.push_back(p);
  }
  return out;
}

}  // namespace

std::string weightsDigest(torch::nn::Module& model) {
  std::string bytes;
  for (const auto& p : uniqueParameters(model)) {
    const auto t = p.detach().contiguous().to(torch::kCPU);
    bytes.append(static_cast<const char*>(t.data_ptr()),
                 static_cast<std::size_t>(t.numel()) * t.element_size());
  }
  return engine::sha256Hex(bytes);
}

std::int64_t parameterCount(torch::nn::Module& model) {
  std::int64_t n = 0;
  for (const auto& p : uniqueParameters(model))
    n += p.numel();
  return n;
}

StepLedger::StepLedger(const JobOptions& options)
    : options_(options),
      faults_(FaultScript::fromEnvironment()),
      stepBegan_(std::chrono::steady_clock::now()) {}

void StepLedger::addMicroLoss(double loss) {
  lossSum_ += loss;
  ++lossCount_;
}

StepLedger::Closed StepLedger::closeStep() {
  Closed closed;
  closed.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stepBegan_).count();
  closed.meanLoss = lossCount_ > 0 ? lossSum_ / static_cast<double>(lossCount_) : 0.0;
  stepSeconds_.push_back(closed.seconds);
  lossSum_ = 0;
  lossCount_ = 0;
  return closed;
}

void StepLedger::finishStep(engine::Engine& engine) {
  const std::int64_t step = engine.globalSteps();
  saveIfDue(engine, options_, step);
  faults_.afterStep(step, engine.dpRank());
  stepBegan_ = std::chrono::steady_clock::now();
}

void StepLedger::abandonStep() {
  lossSum_ = 0;
  lossCount_ = 0;
  stepBegan_ = std::chrono::steady_clock::now();
}

double median(std::vector<double> values) {
  if (values.empty())
    return 0.0;
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

std::int64_t peakRssBytes() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;
}

std::int64_t launcherGeneration() {
  const char* g = std::getenv(worker_env::kGeneration);
  if (g == nullptr)
    return 0;
  try {
    return std::stoll(g);
  } catch (const std::exception&) {
    return 0;
  }
}

int runJob(const std::string& program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const engine::JobFinishedElsewhere& e) {
    spdlog::info("{}: {}", program, e.what());
    return 0;
  } catch (const engine::CheckpointDirInUseError& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return worker_env::kExitCannotRun;
  } catch (const SaveFailed& e) {
    std::cerr << program << ": error: checkpoint save failed: " << e.what() << "\n";
    return worker_env::kExitSaveFailed;
  } catch (const ConfigError& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 2;
  } catch (const IoError& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 1;
  }
}

std::optional<PartitionCopyFigures> partitionCopyFigures(const engine::Engine& engine) {
  if (!engine.partitionCopiesEnabled())
    return std::nullopt;
  return PartitionCopyFigures{
      engine.partitionCopyBytes(),
      engine.timers().partitionCopy /
          static_cast<double>(std::max<std::int64_t>(1, engine.partitionCopyCount()))};
}

}  // namespace stretch::examples
