// The worker group: generations started and stopped as the agent says, their training (step
// by step or boundary to boundary), checkpoint saves and the end of the job
// (sim/detail/simulation.hpp).

#include <algorithm>

#include <fmt/format.h>

#include "runtime/agent/live_plan.hpp"
#include "runtime/common/check.hpp"
#include "sim/detail/simulation.hpp"

namespace stretch::sim::detail {

void Simulation::setPhase(Phase phase) {
  metrics_.setPhase(phase, now_);
}

std::int64_t Simulation::worldSizeNow() const {
  if (interimWorld_ > 0) {
    return interimWorld_;
  }
  return group_.running() ? group_.worldSize() : 0;
}

void Simulation::closeWorldSpan() {
  metrics_.closeWorldSpan(now_, worldSizeNow());
}

const StepPlan& Simulation::planFor(const agent::StartWorkers& a) {
  return planFor(a.worldSize, a.batch, a.dataParallelSize);
}

const StepPlan& Simulation::planFor(std::int64_t worldSize, const config::BatchTriple& batch,
                                    std::int64_t dataParallelSize) {
  const auto key =
      std::make_pair(worldSize, batch.trainBatchSize * 1'000'003 + batch.microBatchPerGpu);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    it = plans_
             .emplace(key, planStep(s_.job, s_.cluster, batch, dataParallelSize,
                                    dataParallelSize > 0 ? worldSize / dataParallelSize : 1))
             .first;
  }
  return it->second;
}

void Simulation::settleRing() {
  if (!group_.stepPending() || joinersPlan_ != nullptr || hung_) {
    return;
  }
  // In aggregate mode the steps of a segment are counted at its end: a step is complete when
  // the segment has run for a step time.
  const bool stepDone = progress_.step > generationStep_ ||
                        (opt_.mode == SimMode::Aggregate && metrics_.phase() == Phase::Computing &&
                         now_ - segStart_ >= plan_->stepNs);
  if (stepDone) {
    group_.stepCompleted();
  }
}

void Simulation::markAffected(std::int64_t node, std::int64_t localRank) {
  if (!s_.job.recovery.live) {
    return;
  }
  settleRing();
  group_.strike(node, localRank);
}

void Simulation::startGeneration(const agent::StartWorkers& a, const agent::LivePlan* live) {
  if (metrics_.tracing() && metrics_.phase() == Phase::Idle && now_ > idleSince_) {
    emit(TimelineKind::Idle, idleSince_, now_ - idleSince_, "no workers", "");
  }
  closeWorldSpan();
  SimTime startup = startupNs_ + checkpoints_.loadNs();
  // With joiners: what trains while they start, from when, and when they are ready.
  const StepPlan* meanwhile = nullptr;
  std::int64_t meanwhileWorld = 0;
  SimTime meanwhileFrom = now_;
  if (survivors_) {
    RunResult& r = metrics_.result();
    if (live) {
      // Survivors keep training from their last completed step; workers that were not among
      // them (joiners, restarted workers) receive the state from a healthy peer.
      progress_ = *survivors_;
      ++r.liveRecoveries;
      startup = reconfigureNs_;
      if (!live->join.empty()) {
        // The joiners start as any worker does (no checkpoint to load: they receive the state),
        // then the next generation forms and sends it to them. Meanwhile the group that lost
        // nobody trains on in its generation; after a loss the plan's interim world trains once
        // it has formed; without one the survivors wait (LivePlan::groupTrainsOn, publish).
        if (live->groupTrainsOn && plan_ != nullptr) {
          meanwhile = plan_;
          meanwhileWorld = group_.worldSize();  // its own generation's, still running
        } else if (live->publish) {
          const std::int64_t world = static_cast<std::int64_t>(live->publish->members.size());
          meanwhileWorld = world;
          const std::int64_t modelParallel =
              a.dataParallelSize > 0 ? a.worldSize / a.dataParallelSize : 1;
          meanwhile = &planFor(world, live->publish->batch, world / modelParallel);
          meanwhileFrom = now_ + reconfigureNs_;
        }
        startup = std::max(startupNs_, meanwhileFrom - now_) + reconfigureNs_ + transferNs_;
      }
    } else {
      ++r.checkpointFallbacks;
    }
  }
  survivors_.reset();
  generationStep_ = progress_.step;
  if (live) {
    group_.continueLive(a, *live);
  } else {
    group_.start(a);
  }
  plan_ = &planFor(a);
  joinersPlan_ = nullptr;
  ++workEpoch_;
  setPhase(Phase::Starting);
  startedAt_ = now_;
  const SimTime joinersReady = now_ + startupNs_;
  const bool trainsMeanwhile = meanwhile != nullptr && joinersReady > meanwhileFrom;
  // Until the joiners are ready, the timeline shows the world that trains meanwhile (it forms,
  // then trains); the full world from the handover on (onJoinersReady).
  interimWorld_ = trainsMeanwhile ? meanwhileWorld : 0;
  emit(TimelineKind::WorldSize, now_, 0, "world_size", "");
  if (runsOnSilentNode()) {
    // The agent does not know yet that a node of this generation failed: it never starts.
    hung_ = true;
    hungSince_ = now_;
    return;
  }
  if (trainsMeanwhile) {
    joinersPlan_ = plan_;
    plan_ = meanwhile;
    sched_.schedule(meanwhileFrom, Payload{Ev::Productive, workEpoch_, 0});
    sched_.schedule(joinersReady, Payload{Ev::JoinersReady, workEpoch_, 0});
    return;
  }
  sched_.schedule(now_ + startup, Payload{Ev::Productive, workEpoch_, 0});
}

void Simulation::onJoinersReady() {
  // The world that trained meanwhile hands over (its step in flight, or a save under way, is
  // cut off, as a stop cuts them): the next generation forms and sends the joiners the state.
  abortWorkInFlight();
  closeWorldSpan();
  interimWorld_ = 0;
  plan_ = joinersPlan_;
  joinersPlan_ = nullptr;
  ++workEpoch_;
  setPhase(Phase::Starting);
  startedAt_ = now_;
  emit(TimelineKind::WorldSize, now_, 0, "world_size", "");
  sched_.schedule(now_ + reconfigureNs_ + transferNs_, Payload{Ev::Productive, workEpoch_, 0});
}

void Simulation::abortWorkInFlight() {
  switch (metrics_.phase()) {
    case Phase::Computing:
      if (opt_.mode == SimMode::Aggregate) {
        settleAt(now_);
      }
      emitCompute(now_);
      break;
    case Phase::Saving:
      emit(TimelineKind::Checkpoint, checkpoints_.saveStart(), now_ - checkpoints_.saveStart(),
           fmt::format("save step {} (aborted)", progress_.step), "");
      break;
    case Phase::Starting:
      emit(TimelineKind::Startup, startedAt_, now_ - startedAt_, "startup (aborted)", "");
      break;
    default:
      break;
  }
}

void Simulation::hang() {
  if (hung_) {
    return;
  }
  abortWorkInFlight();
  ++workEpoch_;
  hung_ = true;
  hungSince_ = now_;
}

void Simulation::endHang() {
  if (!hung_) {
    return;
  }
  emit(TimelineKind::Blocked, hungSince_, now_ - hungSince_, "blocked on a failed node",
       "failure_detection_seconds");
  hung_ = false;
}

void Simulation::stopGeneration(bool keepRunning) {
  if (!group_.running()) {
    return;
  }
  if (hung_) {
    endHang();
  } else {
    abortWorkInFlight();
  }
  setPhase(Phase::Idle);
  idleSince_ = now_;
  closeWorldSpan();
  ++workEpoch_;
  joinersPlan_ = nullptr;
  interimWorld_ = 0;
  ++metrics_.result().stops;
  // Everything since the latest completed checkpoint is lost, unless the next generation resumes
  // from the survivors (live recovery keeps the last completed step: the step in flight is lost).
  if (s_.job.recovery.live) {
    survivors_ = progress_;
  }
  progress_ = checkpoints_.rollback();
  if (!keepRunning) {
    group_.stop();
  }
  emit(TimelineKind::WorldSize, now_, 0, "world_size", "");
}

std::int64_t Simulation::finalStep() const {
  std::int64_t last = kNever;
  if (s_.job.totalSteps) {
    last = *s_.job.totalSteps;
  }
  if (s_.job.totalSamples) {
    const std::int64_t remaining =
        std::max<std::int64_t>(0, *s_.job.totalSamples - progress_.samples);
    const std::int64_t per = std::max<std::int64_t>(1, plan_->samplesPerStep);
    last = std::min(last, progress_.step + ceilDiv(remaining, per));
  }
  return last;
}

std::int64_t Simulation::nextCheckpointStep(std::int64_t after) const {
  return checkpoints_.nextStep(after, plan_->stepNs);
}

void Simulation::onProductive() {
  emit(TimelineKind::Startup, startedAt_, now_ - startedAt_,
       checkpoints_.any() ? fmt::format("startup, load step {}", checkpoints_.latest().step)
                          : "startup",
       "");
  setPhase(Phase::Computing);
  finalStep_ = finalStep();
  if (progress_.step >= finalStep_) {
    finishJob();
    return;
  }
  continueAfterBoundary();
}

// Fires the script at this step, then goes on computing (unless the workers were stopped).
void Simulation::continueAfterBoundary() {
  const std::uint64_t epoch = workEpoch_;
  fireScript();
  if (done_ || epoch != workEpoch_) {
    return;
  }
  if (opt_.mode == SimMode::Aggregate) {
    scheduleBoundary();
  } else {
    startStep();
  }
}

void Simulation::boundaryReached() {
  if (progress_.step >= finalStep_) {
    emitCompute(now_);
    finishJob();
    return;
  }
  if (progress_.step == nextCheckpointStep(progress_.step - 1)) {
    emitCompute(now_);
    beginSave();
    return;
  }
  if (opt_.mode == SimMode::Aggregate) {
    emitCompute(now_);
  }
  continueAfterBoundary();
}

void Simulation::beginSave() {
  setPhase(Phase::Saving);
  checkpoints_.beginSave(now_);
  if (checkpoints_.saveNs() == 0) {
    completeSave();
  } else {
    sched_.schedule(now_ + checkpoints_.saveNs(), Payload{Ev::SaveDone, workEpoch_, 0});
  }
}

void Simulation::completeSave() {
  emit(TimelineKind::Checkpoint, checkpoints_.saveStart(), now_ - checkpoints_.saveStart(),
       fmt::format("save step {}", progress_.step), "");
  setPhase(Phase::Computing);
  checkpoints_.completeSave(progress_);
  ++metrics_.result().checkpoints;
  continueAfterBoundary();
}

void Simulation::finishJob() {
  setPhase(Phase::Finishing);
  group_.finishAll();
  deliverExits();
}

void Simulation::finishRun(Outcome outcome, const std::string& message) {
  if (done_) {
    return;
  }
  const Phase phase = metrics_.phase();
  if (hung_) {
    endHang();
  } else if (phase == Phase::Computing) {
    if (opt_.mode == SimMode::Aggregate) {
      settleAt(now_);
    }
    emitCompute(now_);
  } else if (phase == Phase::Saving) {
    emit(TimelineKind::Checkpoint, checkpoints_.saveStart(), now_ - checkpoints_.saveStart(),
         fmt::format("save step {} (cut off)", progress_.step), "");
  } else if (phase == Phase::Starting) {
    emit(TimelineKind::Startup, startedAt_, now_ - startedAt_, "startup (cut off)", "");
  } else if (phase == Phase::Idle && now_ > idleSince_) {
    emit(TimelineKind::Idle, idleSince_, now_ - idleSince_, "no workers", "");
  }
  setPhase(Phase::Idle);
  closeWorldSpan();
  done_ = true;
  RunResult& r = metrics_.result();
  r.outcome = outcome;
  r.message = message;
}

// ---- aggregate mode: jump from boundary to boundary ---------------------------------------

void Simulation::scheduleBoundary() {
  std::int64_t b = std::min(finalStep_, nextCheckpointStep(progress_.step));
  if (scriptNext_ < s_.script.size()) {
    b = std::min(b, s_.script[scriptNext_].atStep);
  }
  b = std::max(b, progress_.step);
  segStart_ = now_;
  segStep_ = progress_.step;
  boundaryStep_ = b;
  computeFrom_ = now_;
  computeFromStep_ = progress_.step;
  const std::int64_t steps = b - progress_.step;
  if (steps > (limitNs_ - now_) / plan_->stepNs) {
    return;  // no boundary before the run ends: the horizon or the limit settles the progress
  }
  sched_.schedule(now_ + steps * plan_->stepNs, Payload{Ev::Boundary, workEpoch_, 0});
}

void Simulation::advanceSteps(std::int64_t n) {
  progress_.step += n;
  settleRing();
  progress_.samples += n * plan_->samplesPerStep;
  progress_.useful += n * plan_->stepNs;
}

// Steps completed by `t` in the current segment (never past its boundary).
void Simulation::settleAt(SimTime t) {
  const std::int64_t done = std::min((t - segStart_) / plan_->stepNs, boundaryStep_ - segStep_);
  advanceSteps(done);
  segStart_ += done * plan_->stepNs;
  segStep_ += done;
}

void Simulation::settleTo(std::int64_t step) {
  advanceSteps(step - segStep_);
  segStep_ = step;
  segStart_ = now_;
}

void Simulation::emitCompute(SimTime end) {
  if (!metrics_.tracing() || opt_.mode == SimMode::StepLevel || end <= computeFrom_) {
    computeFrom_ = end;
    computeFromStep_ = progress_.step;
    return;
  }
  emit(TimelineKind::Compute, computeFrom_, end - computeFrom_,
       fmt::format("steps {}-{}", computeFromStep_, progress_.step),
       fmt::format("{:.6f} s/step", nanosToSeconds(plan_->stepNs)));
  computeFrom_ = end;
  computeFromStep_ = progress_.step;
}

// ---- step-level mode: every micro step and bucket -----------------------------------------

void Simulation::startStep() {
  stepStart_ = now_;
  if (plan_->gas > 1) {
    sched_.schedule(now_ + plan_->microNs, Payload{Ev::Micro, workEpoch_, 1});
  } else {
    beginLastMicro();
  }
}

void Simulation::onMicro(std::int64_t index) {
  emit(TimelineKind::MicroStep, now_ - plan_->microNs, plan_->microNs,
       fmt::format("micro {}", index), "");
  if (index + 1 < plan_->gas) {
    sched_.schedule(now_ + plan_->microNs, Payload{Ev::Micro, workEpoch_, index + 1});
  } else {
    beginLastMicro();
  }
}

void Simulation::beginLastMicro() {
  lastMicroStart_ = now_;
  if (plan_->buckets == 0) {
    sched_.schedule(now_ + plan_->stragglerNs + plan_->microNs + plan_->overheadNs,
                    Payload{Ev::Bucket, workEpoch_, 0});
  } else {
    sched_.schedule(now_ + plan_->bucketEnd(1, 0), Payload{Ev::Bucket, workEpoch_, 1});
  }
}

void Simulation::onBucket(std::int64_t j) {
  if (j > 0) {
    emit(TimelineKind::Collective, now_ - plan_->bucketNs, plan_->bucketNs,
         fmt::format("all_reduce bucket {}/{}", j, plan_->buckets),
         fmt::format("{} bytes, {:.1f} GB/s busbw", plan_->bucketBytes,
                     plan_->bucketCost.busbwGBps));
    const SimTime previous = now_ - lastMicroStart_;
    if (j < plan_->buckets) {
      sched_.schedule(lastMicroStart_ + plan_->bucketEnd(j + 1, previous),
                      Payload{Ev::Bucket, workEpoch_, j + 1});
      return;
    }
    const SimTime end = lastMicroStart_ + std::max(previous, plan_->stragglerNs + plan_->microNs) +
                        plan_->overheadNs;
    if (end > now_) {
      sched_.schedule(end, Payload{Ev::Bucket, workEpoch_, 0});
      return;
    }
  }
  emit(TimelineKind::MicroStep, lastMicroStart_, plan_->microNs,
       fmt::format("micro {}", plan_->gas), "");
  STRETCH_CHECK_EQ(now_ - stepStart_, plan_->stepNs, "step-level step time vs the plan");
  advanceSteps(1);
  boundaryReached();
}

}  // namespace stretch::sim::detail
