#include "planner/batch_plan.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/common/error.hpp"

namespace stretch::planner {

namespace {

using config::ElasticityVersion;

std::string versionName(ElasticityVersion v) {
  return std::string(config::toString(v));
}

struct Candidate {
  std::string change;
  config::ElasticityConfig elasticity;
};

// Key for de-duplicating alternatives.
auto keyOf(const config::ElasticityConfig& e) {
  std::vector<std::int64_t> micro = e.microBatchSizes;
  std::sort(micro.begin(), micro.end());
  return std::make_tuple(static_cast<int>(e.version), micro, e.maxTrainBatchSize,
                         e.targetBatchSize.value_or(0), e.batchTolerance);
}

// Better coverage first, then utilisation, then a batch closer to the current one.
bool better(const Coverage& a, std::int64_t batchA, const Coverage& b, std::int64_t batchB,
            std::int64_t reference) {
  constexpr double kEps = 1e-12;
  if (a.covered > b.covered + kEps || a.covered < b.covered - kEps) {
    return a.covered > b.covered;
  }
  if (a.utilisation > b.utilisation + kEps || a.utilisation < b.utilisation - kEps) {
    return a.utilisation > b.utilisation;
  }
  return std::llabs(batchA - reference) < std::llabs(batchB - reference);
}

// What every SizeOracle of one section is built for: the job's parallelism and node selection on
// the scenario's cluster, up to maxGpus, judged against the expected sizes.
struct SectionContext {
  const sim::Scenario& scenario;
  std::int64_t maxGpus = 0;
  const std::vector<ExpectedSize>& expected;

  // Throws what SizeOracle throws for a config no solver accepts.
  SizeOracle oracleFor(const config::DsConfig& c) const {
    return SizeOracle(c, scenario.job.modelParallelSize, scenario.cluster.gpusPerNode,
                      scenario.agent.selection, maxGpus);
  }
};

// The cluster's GPU count, or the largest expected size when that is larger.
std::int64_t largestWorld(const sim::Scenario& sc, const std::vector<ExpectedSize>& expected) {
  std::int64_t maxGpus = sc.cluster.gpus();
  for (const ExpectedSize& e : expected) {
    maxGpus = std::max(maxGpus, e.gpus);
  }
  return maxGpus;
}

// The plan of one solver version; a config it rejects gives a plan with only `error` set.
VersionPlan planVersion(const SectionContext& ctx, const config::DsConfig& c,
                        const std::string& label) {
  VersionPlan v;
  v.version = label;
  try {
    const SizeOracle oracle = ctx.oracleFor(c);
    const elasticity::WorldSizeRules& rules = oracle.rules();
    v.finalBatch = rules.finalBatch().value_or(0);
    const std::vector<std::int64_t>& all =
        rules.elastic() ? rules.validGpuCounts() : oracle.sizes();
    for (const std::int64_t gpus : all) {
      const auto triple = rules.batchFor(gpus);
      if (!triple) {
        continue;
      }
      v.rows.push_back(BatchRow{gpus, gpus / rules.modelParallelSize(), triple->microBatchPerGpu,
                                triple->gradientAccumulation, triple->trainBatchSize});
    }
    v.coverage = oracle.coverage(ctx.expected);
  } catch (const Error& e) {
    v.error = e.what();
  }
  return v;
}

// The job's own version first, then the other requested ones in their order.
std::vector<ElasticityVersion> versionsToPlan(ElasticityVersion own,
                                              const std::vector<ElasticityVersion>& requested) {
  std::vector<ElasticityVersion> versions = {own};
  for (const ElasticityVersion v : requested) {
    if (v != own) {
      versions.push_back(v);
    }
  }
  return versions;
}

// The job's batch, and the batches a suggestion may have: within the tolerance of it.
struct BatchBand {
  std::int64_t reference = 0;
  std::int64_t lo = 0;
  std::int64_t hi = 0;
};

BatchBand batchBand(std::int64_t reference, double tol) {
  BatchBand band;
  band.reference = reference;
  band.lo =
      static_cast<std::int64_t>(std::ceil(static_cast<double>(reference) * (1.0 - tol) - 1e-9));
  band.hi =
      static_cast<std::int64_t>(std::floor(static_cast<double>(reference) * (1.0 + tol) + 1e-9));
  return band;
}

// Sorted, without duplicates.
std::vector<std::int64_t> sortedMicro(std::vector<std::int64_t> m) {
  std::sort(m.begin(), m.end());
  m.erase(std::unique(m.begin(), m.end()), m.end());
  return m;
}

// Alternatives to the micro batch list: the plan's own lists, each micro batch up to
// max(8, twice the largest) and at most 64 added, and each one dropped (when more than one).
void addMicroBatchChanges(const config::ElasticityConfig& base,
                          const std::vector<std::vector<std::int64_t>>& lists,
                          std::vector<Candidate>& candidates) {
  const std::vector<std::int64_t> micro = sortedMicro(base.microBatchSizes);
  for (const auto& list : lists) {
    config::ElasticityConfig e = base;
    e.microBatchSizes = sortedMicro(list);
    candidates.push_back({fmt::format("micro batches {} -> {}", micro, e.microBatchSizes), e});
  }
  const std::int64_t largest = micro.back();
  for (std::int64_t x = 1; x <= std::max<std::int64_t>(8, 2 * largest) && x <= 64; ++x) {
    if (std::binary_search(micro.begin(), micro.end(), x)) {
      continue;
    }
    config::ElasticityConfig e = base;
    e.microBatchSizes = micro;
    e.microBatchSizes.push_back(x);
    e.microBatchSizes = sortedMicro(e.microBatchSizes);
    candidates.push_back(
        {fmt::format("add micro batch {} ({} -> {})", x, micro, e.microBatchSizes), e});
  }
  if (micro.size() > 1) {
    for (const std::int64_t x : micro) {
      config::ElasticityConfig e = base;
      e.microBatchSizes.clear();
      for (const std::int64_t m : micro) {
        if (m != x) {
          e.microBatchSizes.push_back(m);
        }
      }
      candidates.push_back(
          {fmt::format("drop micro batch {} ({} -> {})", x, micro, e.microBatchSizes), e});
    }
  }
}

// Alternatives to max_train_batch_size: eight steps across the tolerance band (none without a
// tolerance, or when the job's version is exact).
void addMaxBatchChanges(const config::ElasticityConfig& base, double tol,
                        std::vector<Candidate>& candidates) {
  if (tol > 0.0 && base.version != ElasticityVersion::Exact) {
    for (int j = -4; j <= 4; ++j) {
      if (j == 0) {
        continue;
      }
      config::ElasticityConfig e = base;
      e.maxTrainBatchSize = std::max<std::int64_t>(
          1, static_cast<std::int64_t>(std::llround(static_cast<double>(base.maxTrainBatchSize) *
                                                    (1.0 + tol * j / 4.0))));
      if (e.maxTrainBatchSize == base.maxTrainBatchSize) {
        continue;
      }
      candidates.push_back({fmt::format("max_train_batch_size {} -> {}", base.maxTrainBatchSize,
                                        e.maxTrainBatchSize),
                            e});
    }
  }
}

// Stretch's exact solver: the batch with the most valid sizes in the band (or under the cap).
void addExactSolverChange(const config::ElasticityConfig& base, const BatchBand& band, double tol,
                          std::vector<Candidate>& candidates) {
  config::ElasticityConfig e = base;
  e.version = ElasticityVersion::Exact;
  if (tol > 0.0) {
    e.targetBatchSize = band.reference;
    e.batchTolerance = tol;
    e.maxTrainBatchSize = std::max(base.maxTrainBatchSize, band.hi);
    candidates.push_back(
        {fmt::format("version exact, target batch {} ± {:g} %", band.reference, 100.0 * tol), e});
  } else if (base.version != ElasticityVersion::Exact) {
    candidates.push_back({"version exact (same cap)", e});
  }
}

// The configurations near `base` worth trying, in the order they are tried.
std::vector<Candidate> nearbyConfigs(const config::ElasticityConfig& base,
                                     const std::vector<std::vector<std::int64_t>>& microLists,
                                     double tol, const BatchBand& band) {
  std::vector<Candidate> candidates;
  addMicroBatchChanges(base, microLists, candidates);
  addMaxBatchChanges(base, tol, candidates);
  addExactSolverChange(base, band, tol, candidates);
  return candidates;
}

// Whether `cov` is worth suggesting over the job's own: more expected sizes covered, or fewer
// GPUs wasted at equal coverage.
bool improvesOn(const Coverage& cov, const Coverage& current) {
  return cov.covered > current.covered + 1e-12 ||
         (cov.covered >= current.covered - 1e-12 && cov.utilisation > current.utilisation + 0.005);
}

BatchSuggestion suggestionFrom(const Candidate& cand, const SizeOracle& oracle, std::int64_t batch,
                               const Coverage& cov) {
  BatchSuggestion s;
  s.change = cand.change;
  s.version = versionName(cand.elasticity.version);
  s.microBatches = cand.elasticity.microBatchSizes;
  s.maxBatch = cand.elasticity.maxTrainBatchSize;
  s.targetBatch = cand.elasticity.targetBatchSize;
  s.finalBatch = batch;
  s.validSizes = static_cast<std::int64_t>(oracle.rules().validGpuCounts().size());
  s.coverage = cov;
  return s;
}

// The best of the candidates (duplicates of the job's config or of an earlier one skipped) whose
// batch stays in the band and that improves on the job's own plan `current`; nullopt when none
// does. Adds to `tried` each candidate evaluated.
std::optional<BatchSuggestion> bestSuggestion(const SectionContext& ctx,
                                              const config::DsConfig& config,
                                              const VersionPlan& current,
                                              const std::vector<Candidate>& candidates,
                                              const BatchBand& band, std::int64_t& tried) {
  std::set<decltype(keyOf(config.elasticity))> seen = {keyOf(config.elasticity)};
  std::optional<BatchSuggestion> best;
  for (const Candidate& cand : candidates) {
    if (!seen.insert(keyOf(cand.elasticity)).second) {
      continue;
    }
    ++tried;
    config::DsConfig c = config;
    c.elasticity = cand.elasticity;
    try {
      const SizeOracle oracle = ctx.oracleFor(c);
      const std::int64_t batch = oracle.rules().finalBatch().value_or(0);
      if (batch < band.lo || batch > band.hi) {
        continue;
      }
      const Coverage cov = oracle.coverage(ctx.expected);
      const Coverage& bestCov = best ? best->coverage : current.coverage;
      const std::int64_t bestBatch = best ? best->finalBatch : band.reference;
      if (!better(cov, batch, bestCov, bestBatch, band.reference)) {
        continue;
      }
      if (!improvesOn(cov, current.coverage)) {
        continue;
      }
      best = suggestionFrom(cand, oracle, batch, cov);
    } catch (const Error&) {
      // This alternative has no plan (e.g. v0.2 constraints): not a suggestion.
    }
  }
  return best;
}

}  // namespace

SizeOracle::SizeOracle(const config::DsConfig& config, std::int64_t modelParallelSize,
                       std::int64_t gpusPerNode, agent::NodeSelection selection,
                       std::int64_t maxGpus)
    : rules_(std::make_unique<elasticity::WorldSizeRules>(config, modelParallelSize)),
      gpusPerNode_(std::max<std::int64_t>(1, gpusPerNode)),
      wholeNodes_(selection == agent::NodeSelection::WholeNodes) {
  if (rules_->elastic()) {
    for (const std::int64_t g : rules_->validGpuCounts()) {
      if (g <= maxGpus && (!wholeNodes_ || g % gpusPerNode_ == 0)) {
        sizes_.push_back(g);
      }
    }
    return;
  }
  const std::int64_t step = wholeNodes_ ? gpusPerNode_ : 1;
  for (std::int64_t g = step; g <= maxGpus; g += step) {
    if (rules_->isValid(g)) {
      sizes_.push_back(g);
    }
  }
}

std::int64_t SizeOracle::running(std::int64_t available) const noexcept {
  const std::int64_t usable = wholeNodes_ ? (available / gpusPerNode_) * gpusPerNode_ : available;
  const auto it = std::upper_bound(sizes_.begin(), sizes_.end(), usable);
  return it == sizes_.begin() ? 0 : *std::prev(it);
}

bool SizeOracle::reachable(std::int64_t gpus) const noexcept {
  return std::binary_search(sizes_.begin(), sizes_.end(), gpus);
}

std::optional<config::BatchTriple> SizeOracle::batchFor(std::int64_t gpus) const {
  return reachable(gpus) ? rules_->batchFor(gpus) : std::nullopt;
}

Coverage SizeOracle::coverage(const std::vector<ExpectedSize>& expected) const noexcept {
  Coverage c;
  double total = 0.0;
  for (const ExpectedSize& e : expected) {
    total += e.weight;
  }
  for (const ExpectedSize& e : expected) {
    const double w = total > 0.0 ? e.weight / total : 0.0;
    ++c.expectedSizes;
    if (reachable(e.gpus)) {
      c.covered += w;
      ++c.coveredSizes;
    }
    if (e.gpus > 0) {
      c.utilisation += w * static_cast<double>(running(e.gpus)) / static_cast<double>(e.gpus);
    }
  }
  return c;
}

config::DsConfig effectiveConfig(const PlanInput& input) {
  config::DsConfig c = input.scenario.job.config;
  const PlanSettings& s = input.settings;
  if ((s.maxBatch || s.microBatches) && !c.elasticity.enabled) {
    throw ConfigError(
        ErrorDetail{s.maxBatch ? "plan.max_batch" : "plan.micro_batch_sizes",
                    s.maxBatch ? std::to_string(*s.maxBatch) : fmt::format("{}", *s.microBatches),
                    "a job config with an enabled elasticity section to override"});
  }
  if (s.maxBatch) {
    c.elasticity.maxTrainBatchSize = *s.maxBatch;
  }
  if (s.microBatches) {
    c.elasticity.microBatchSizes = *s.microBatches;
  }
  return c;
}

BatchSection computeBatchSection(const PlanInput& input, const config::DsConfig& config,
                                 const std::vector<ExpectedSize>& expected) {
  const PlanSettings& settings = input.settings;
  const SectionContext ctx{input.scenario, largestWorld(input.scenario, expected), expected};

  BatchSection out;
  out.elastic = config.elasticity.enabled;
  out.elasticity = config.elasticity;
  out.expected = expected;
  out.tolerance = settings.batchTolerance;

  if (!out.elastic) {
    out.version = "fixed";
    out.versions.push_back(planVersion(ctx, config, "fixed"));
    return out;
  }

  out.version = versionName(config.elasticity.version);
  for (const ElasticityVersion v : versionsToPlan(config.elasticity.version, settings.versions)) {
    config::DsConfig c = config;
    c.elasticity.version = v;
    out.versions.push_back(planVersion(ctx, c, versionName(v)));
  }
  const VersionPlan& current = out.versions.front();
  if (!current.error.empty()) {
    return out;  // the job's own version has no plan: makePlan reports it
  }

  // ---- the suggestion: nearby configurations, same batch within the tolerance band ----------
  const BatchBand band = batchBand(current.finalBatch, settings.batchTolerance);
  const std::vector<Candidate> candidates = nearbyConfigs(
      config.elasticity, settings.microBatchCandidates, settings.batchTolerance, band);
  out.suggestion = bestSuggestion(ctx, config, current, candidates, band, out.alternativesTried);
  return out;
}

}  // namespace stretch::planner
