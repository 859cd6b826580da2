// The "csv" format: one block per table, each headed by a "# name" line and a header row, blocks
// separated by an empty line.

#include "sim/csv.hpp"

#include <cmath>

#include <fmt/format.h>

#include "planner/report/formats.hpp"

namespace stretch::planner::report {

namespace {

std::string csvNumber(double x) {
  return std::isfinite(x) ? fmt::format("{:.10g}", x) : "";
}

}  // namespace

std::string renderCsv(const Plan& p) {
  std::string out;
  out += "# scale\n";
  out +=
      "gpus,nodes,rented_gpus,batch,micro_batch,gradient_accumulation,step_seconds,"
      "samples_per_second,job_mtbf_hours,interval_minutes,ettr,ettr_ci95,goodput,goodput_ci95,"
      "time_to_train_hours,time_to_train_ci95,gpu_hours,cost,simulated,recommended\n";
  for (std::size_t i = 0; i < p.scale.rows.size(); ++i) {
    const ScaleRow& r = p.scale.rows[i];
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.gpus, r.nodes,
        r.rentedGpus, r.batch, r.microBatch, r.gradientAccumulation, csvNumber(r.stepSeconds),
        csvNumber(r.samplesPerSecond), csvNumber(r.jobMtbfHours), csvNumber(r.intervalMinutes),
        csvNumber(r.ettr.mean), csvNumber(r.ettr.ci95), csvNumber(r.goodput.mean),
        csvNumber(r.goodput.ci95), r.timeToTrainHours ? csvNumber(r.timeToTrainHours->mean) : "",
        r.timeToTrainHours ? csvNumber(r.timeToTrainHours->ci95) : "",
        r.gpuHours ? csvNumber(r.gpuHours->mean) : "", r.cost ? csvNumber(r.cost->mean) : "",
        r.simulated ? 1 : 0, i == p.recommendation.row ? 1 : 0);
  }
  out += "\n# checkpoint_curve\n";
  out += "minutes,effective_minutes,analytic_ettr,ettr,ettr_ci95,label\n";
  for (const IntervalPoint& pt : p.checkpoint.curve) {
    out += fmt::format("{},{},{},{},{},{}\n", csvNumber(pt.minutes), csvNumber(pt.effectiveMinutes),
                       csvNumber(pt.analyticEttr), csvNumber(pt.ettr.mean), csvNumber(pt.ettr.ci95),
                       pt.label);
  }
  out += "\n# checkpoint_intervals\n";
  out += "name,minutes\n";
  const CheckpointSection& c = p.checkpoint;
  out += fmt::format("young,{}\ndaly,{}\nexact_daly,{}\n", csvNumber(c.youngMinutes),
                     csvNumber(c.dalyMinutes), csvNumber(c.exactDalyMinutes));
  if (c.simulated) {
    out += fmt::format("simulated_optimum,{}\n", csvNumber(c.simulatedOptimumMinutes));
  }
  out += fmt::format("recommended,{}\n", csvNumber(c.recommendedMinutes));
  out += "\n# batch_versions\n";
  out += "version,final_batch,valid_world_sizes,covered,utilisation,error\n";
  for (const VersionPlan& v : p.batch.versions) {
    out += fmt::format("{},{},{},{},{},{}\n", v.version, v.finalBatch, v.rows.size(),
                       csvNumber(v.coverage.covered), csvNumber(v.coverage.utilisation),
                       sim::csvField(v.error));
  }
  out += "\n# valid_world_sizes\n";
  out += "version,gpus,data_parallel,micro_batch,gradient_accumulation,batch\n";
  for (const VersionPlan& v : p.batch.versions) {
    for (const BatchRow& r : v.rows) {
      out += fmt::format("{},{},{},{},{},{}\n", v.version, r.gpus, r.dataParallel, r.microBatch,
                         r.gradientAccumulation, r.batch);
    }
  }
  out += "\n# recommendation\n";
  const Recommendation& r = p.recommendation;
  out +=
      "objective,gpus,nodes,batch,micro_batch,gradient_accumulation,interval_minutes,"
      "interval_steps,ettr,goodput,time_to_train_hours,gpu_hours,cost\n";
  out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", toString(r.objective), r.gpus,
                     r.nodes, r.batch, r.microBatch, r.gradientAccumulation,
                     csvNumber(r.intervalMinutes), r.intervalSteps, csvNumber(r.ettr),
                     csvNumber(r.goodput), r.timeToTrainHours ? csvNumber(*r.timeToTrainHours) : "",
                     r.gpuHours ? csvNumber(*r.gpuHours) : "", r.cost ? csvNumber(*r.cost) : "");
  out += "\n# portability\n";
  out += "written_at,resume_gpus,micro_batch,gradient_accumulation,batch,same_batch\n";
  for (const PortabilityRow& row : p.portability.rows) {
    out += fmt::format("{},{},{},{},{},{}\n", p.portability.writtenAt, row.gpus, row.microBatch,
                       row.gradientAccumulation, row.batch, row.sameBatch ? 1 : 0);
  }
  return out;
}

}  // namespace stretch::planner::report
