// The "json" format: every figure of the plan (schema kPlanSchema, described in docs/planner.md).

#include <cmath>

#include <nlohmann/json.hpp>

#include "planner/report.hpp"
#include "planner/report/formats.hpp"
#include "sim/cluster.hpp"

namespace stretch::planner::report {

namespace {

using nlohmann::json;

// Infinity and NaN have no JSON number: null.
json number(double x) {
  return std::isfinite(x) ? json(x) : json(nullptr);
}

json optionalSummary(const std::optional<sim::MetricSummary>& m) {
  return m ? sim::metricSummaryToJson(*m) : json(nullptr);
}

json coverageJson(const Coverage& c) {
  return json{{"covered", c.covered},
              {"utilisation", c.utilisation},
              {"covered_sizes", c.coveredSizes},
              {"expected_sizes", c.expectedSizes}};
}

json settingsJson(const Plan& p) {
  return json{{"objective", std::string(toString(p.settings.objective))},
              {"price_per_gpu_hour",
               p.settings.pricePerGpuHour ? json(*p.settings.pricePerGpuHour) : json(nullptr)},
              {"seeds", p.settings.seeds},
              {"sweep_seeds", p.settings.sweepSeeds},
              {"batch_tolerance", p.settings.batchTolerance},
              {"max_rows", p.settings.maxRows}};
}

// 1. batch
json batchJson(const Plan& p) {
  const BatchSection& b = p.batch;
  json batch;
  batch["elastic"] = b.elastic;
  batch["version"] = b.version;
  batch["tolerance"] = b.tolerance;
  batch["elasticity"] =
      json{{"max_train_batch_size", b.elasticity.maxTrainBatchSize},
           {"micro_batch_sizes", b.elasticity.microBatchSizes},
           {"min_gpus", b.elasticity.minGpus},
           {"max_gpus", b.elasticity.maxGpus},
           {"num_gpus_per_node", b.elasticity.numGpusPerNode},
           {"model_parallel_size", b.elasticity.modelParallelSize},
           {"prefer_larger_batch", b.elasticity.preferLargerBatch},
           {"version", std::string(config::toString(b.elasticity.version))},
           {"target_batch_size",
            b.elasticity.targetBatchSize ? json(*b.elasticity.targetBatchSize) : json(nullptr)},
           {"batch_tolerance", b.elasticity.batchTolerance}};
  json expected = json::array();
  for (const ExpectedSize& e : b.expected) {
    expected.push_back(json{{"gpus", e.gpus}, {"weight", e.weight}});
  }
  batch["expected_world_sizes"] = expected;
  json versions = json::array();
  for (const VersionPlan& v : b.versions) {
    json vj{{"version", v.version},
            {"final_batch", v.finalBatch},
            {"valid_world_sizes", v.rows.size()},
            {"coverage", coverageJson(v.coverage)}};
    if (!v.error.empty()) {
      vj["error"] = v.error;
    }
    json rows = json::array();
    for (const BatchRow& r : v.rows) {
      rows.push_back(json{{"gpus", r.gpus},
                          {"data_parallel", r.dataParallel},
                          {"micro_batch", r.microBatch},
                          {"gradient_accumulation", r.gradientAccumulation},
                          {"batch", r.batch}});
    }
    vj["rows"] = rows;
    versions.push_back(vj);
  }
  batch["versions"] = versions;
  batch["alternatives_tried"] = b.alternativesTried;
  if (b.suggestion) {
    const BatchSuggestion& s = *b.suggestion;
    batch["suggestion"] =
        json{{"change", s.change},
             {"version", s.version},
             {"micro_batch_sizes", s.microBatches},
             {"max_train_batch_size", s.maxBatch},
             {"target_batch_size", s.targetBatch ? json(*s.targetBatch) : json(nullptr)},
             {"final_batch", s.finalBatch},
             {"valid_world_sizes", s.validSizes},
             {"coverage", coverageJson(s.coverage)}};
  } else {
    batch["suggestion"] = nullptr;
  }
  return batch;
}

// 2. checkpoint interval
json checkpointJson(const Plan& p) {
  const CheckpointSection& c = p.checkpoint;
  json ck{{"gpus", c.gpus},
          {"failure_model", c.failureModel},
          {"failures", c.failures},
          {"job_mtbf_hours", number(c.jobMtbfHours)},
          {"save_seconds", c.saveSeconds},
          {"restart_seconds", c.restartSeconds},
          {"step_seconds", c.stepSeconds},
          {"young_minutes", number(c.youngMinutes)},
          {"daly_minutes", number(c.dalyMinutes)},
          {"exact_daly_minutes", number(c.exactDalyMinutes)},
          {"daly_ettr", number(c.dalyEttr)},
          {"configured_minutes", c.configuredMinutes ? json(*c.configuredMinutes) : json(nullptr)},
          {"simulated", c.simulated},
          {"skipped", c.skipped},
          {"seeds", c.seeds},
          {"run_hours", c.runHours},
          {"reduction", c.reduction}};
  json curve = json::array();
  for (const IntervalPoint& pt : c.curve) {
    curve.push_back(json{{"minutes", pt.minutes},
                         {"effective_minutes", pt.effectiveMinutes},
                         {"analytic_ettr", pt.analyticEttr},
                         {"ettr", sim::metricSummaryToJson(pt.ettr)},
                         {"label", pt.label}});
  }
  ck["curve"] = curve;
  if (c.simulated) {
    ck["simulated_optimum_minutes"] = c.simulatedOptimumMinutes;
    ck["simulated_optimum_ettr"] = sim::metricSummaryToJson(c.simulatedOptimumEttr);
    ck["simulated_optimum_in_sample_ettr"] =
        sim::metricSummaryToJson(c.simulatedOptimumInSampleEttr);
    ck["daly_simulated_ettr"] = sim::metricSummaryToJson(c.dalySimulatedEttr);
    ck["young_simulated_ettr"] = sim::metricSummaryToJson(c.youngSimulatedEttr);
    ck["gain_over_daly"] = sim::metricSummaryToJson(c.gainOverDaly);
    ck["gain_over_young"] = sim::metricSummaryToJson(c.gainOverYoung);
  }
  ck["recommended_minutes"] = number(c.recommendedMinutes);
  ck["recommended_steps"] = c.recommendedSteps;
  ck["recommended_source"] = c.recommendedSource;
  ck["reason"] = c.reason;
  return ck;
}

// 3. scale table
json scaleJson(const Plan& p) {
  json scale{{"total_samples", p.scale.totalSamples ? json(*p.scale.totalSamples) : json(nullptr)},
             {"monte_carlo", p.scale.monteCarlo},
             {"seeds", p.scale.seeds}};
  json rows = json::array();
  for (const ScaleRow& r : p.scale.rows) {
    rows.push_back(json{{"gpus", r.gpus},
                        {"nodes", r.nodes},
                        {"rented_gpus", r.rentedGpus},
                        {"batch", r.batch},
                        {"micro_batch", r.microBatch},
                        {"gradient_accumulation", r.gradientAccumulation},
                        {"step_seconds", r.stepSeconds},
                        {"exposed_comm_seconds", r.exposedCommSeconds},
                        {"samples_per_second", r.samplesPerSecond},
                        {"job_mtbf_hours", number(r.jobMtbfHours)},
                        {"interval_minutes", number(r.intervalMinutes)},
                        {"ettr", sim::metricSummaryToJson(r.ettr)},
                        {"goodput", sim::metricSummaryToJson(r.goodput)},
                        {"time_to_train_hours", optionalSummary(r.timeToTrainHours)},
                        {"gpu_hours", optionalSummary(r.gpuHours)},
                        {"cost", optionalSummary(r.cost)},
                        {"simulated", r.simulated},
                        {"reduction", r.reduction},
                        {"shown", r.shown}});
  }
  scale["rows"] = rows;
  return scale;
}

// 4. recommendation
json recommendationJson(const Plan& p) {
  const Recommendation& r = p.recommendation;
  auto opt = [](const std::optional<double>& x) { return x ? number(*x) : json(nullptr); };
  return json{{"objective", std::string(toString(r.objective))},
              {"row", r.row},
              {"gpus", r.gpus},
              {"nodes", r.nodes},
              {"batch", r.batch},
              {"micro_batch", r.microBatch},
              {"gradient_accumulation", r.gradientAccumulation},
              {"interval_minutes", number(r.intervalMinutes)},
              {"interval_steps", r.intervalSteps},
              {"ettr", r.ettr},
              {"goodput", r.goodput},
              {"time_to_train_hours", opt(r.timeToTrainHours)},
              {"gpu_hours", opt(r.gpuHours)},
              {"cost", opt(r.cost)},
              {"reasons", r.reasons},
              {"config", json::parse(r.configJson)}};
}

// 5. checkpoint portability
json portabilityJson(const Plan& p) {
  json port{{"written_at", p.portability.writtenAt},
            {"zero_stage", p.portability.zeroStage},
            {"notes", p.portability.notes}};
  json prow = json::array();
  for (const PortabilityRow& row : p.portability.rows) {
    prow.push_back(json{{"gpus", row.gpus},
                        {"micro_batch", row.microBatch},
                        {"gradient_accumulation", row.gradientAccumulation},
                        {"batch", row.batch},
                        {"same_batch", row.sameBatch}});
  }
  port["rows"] = prow;
  return port;
}

json renderJsonValue(const Plan& p) {
  json j;
  j["schema"] = std::string(kPlanSchema);
  j["name"] = p.name;
  j["description"] = p.description;
  j["wall_seconds"] = p.wallSeconds;
  j["threads"] = p.threads;
  j["cluster"] = sim::clusterToJson(p.cluster);
  j["failures"] = p.failureSummary;
  j["warnings"] = p.warnings;
  j["settings"] = settingsJson(p);
  j["batch"] = batchJson(p);
  j["checkpoint"] = checkpointJson(p);
  j["scale"] = scaleJson(p);
  j["recommendation"] = recommendationJson(p);
  j["portability"] = portabilityJson(p);
  if (p.recovery.compared) {
    const RecoverySection& r = p.recovery;
    json rec{{"gpus", r.gpus},
             {"nodes", r.nodes},
             {"reconfigure_seconds", r.reconfigureSeconds},
             {"reconfigure_source", r.reconfigureSource},
             {"restart_seconds", r.restartSeconds},
             {"restart_source", r.restartSource},
             {"failure_detection_seconds", r.detectionSeconds},
             {"failure_detection_source", r.detectionSource},
             {"transfer_seconds", r.transferSeconds},
             {"seeds", r.seeds},
             {"gain", sim::metricSummaryToJson(r.gain)}};
    for (const RecoveryMode* m : {&r.checkpoint, &r.live}) {
      rec[m->mode] = json{{"interval_minutes", number(m->intervalMinutes)},
                          {"interval_steps", m->intervalSteps},
                          {"ettr", sim::metricSummaryToJson(m->ettr)},
                          {"time_to_train_hours",
                           m->timeToTrainHours ? json(*m->timeToTrainHours) : json(nullptr)}};
    }
    j["recovery"] = rec;
  }
  return j;
}

}  // namespace

std::string renderJson(const Plan& p) {
  return renderJsonValue(p).dump(2) + "\n";
}

}  // namespace stretch::planner::report
