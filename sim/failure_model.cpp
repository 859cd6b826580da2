#include "sim/failure_model.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <queue>

#include "runtime/common/check.hpp"

namespace stretch::sim {

namespace {

// Draws in nanoseconds, capped far beyond any run so the addition cannot overflow.
SimTime drawToNanos(double hours) {
  constexpr double kCapHours = 1e6;  // ~114 years
  return hoursToNanos(std::min(hours, kCapHours));
}

class ExponentialProcess final : public FailureProcess {
 public:
  ExponentialProcess(std::int64_t nodeCount, double meanHours, std::uint64_t seed)
      : meanHours_(meanHours), position_(static_cast<std::size_t>(nodeCount), -1), rng_(seed) {}

  void nodeUp(std::int64_t node, SimTime now) override {
    auto& pos = position_.at(static_cast<std::size_t>(node));
    if (pos >= 0) {
      return;
    }
    pos = static_cast<std::int64_t>(up_.size());
    up_.push_back(node);
    invalidate(now);
  }
  void nodeDown(std::int64_t node, SimTime now) override {
    auto& pos = position_.at(static_cast<std::size_t>(node));
    if (pos < 0) {
      return;
    }
    const std::int64_t last = up_.back();
    up_[static_cast<std::size_t>(pos)] = last;
    position_[static_cast<std::size_t>(last)] = pos;
    up_.pop_back();
    pos = -1;
    invalidate(now);
  }
  void nodeRenewed(std::int64_t, SimTime) override {}  // memoryless
  std::optional<FailureStrike> peek() override {
    if (!pending_ && !up_.empty()) {
      const double hours = rng_.exponential(meanHours_ / static_cast<double>(up_.size()));
      const auto index = rng_.below(up_.size());
      pending_ = FailureStrike{since_ + drawToNanos(hours), up_[index], std::nullopt, std::nullopt};
    }
    return pending_;
  }
  void consume(SimTime now) override { invalidate(now); }

 private:
  void invalidate(SimTime now) {
    pending_.reset();
    since_ = now;
  }

  double meanHours_;
  std::vector<std::int64_t> up_;
  std::vector<std::int64_t> position_;  // index in up_, -1 when down
  std::optional<FailureStrike> pending_;
  SimTime since_ = 0;
  Rng rng_;
};

class WeibullProcess final : public FailureProcess {
 public:
  WeibullProcess(std::int64_t nodeCount, double meanHours, double shape, std::uint64_t seed)
      : shape_(shape),
        scaleHours_(weibullScaleForMean(meanHours, shape)),
        epoch_(static_cast<std::size_t>(nodeCount), 0),
        up_(static_cast<std::size_t>(nodeCount), false),
        rng_(seed) {}

  void nodeUp(std::int64_t node, SimTime now) override {
    const auto i = static_cast<std::size_t>(node);
    if (up_.at(i)) {
      return;
    }
    up_[i] = true;
    arm(node, now);
  }
  void nodeDown(std::int64_t node, SimTime) override {
    const auto i = static_cast<std::size_t>(node);
    if (!up_.at(i)) {
      return;
    }
    up_[i] = false;
    ++epoch_[i];
  }
  void nodeRenewed(std::int64_t node, SimTime now) override {
    const auto i = static_cast<std::size_t>(node);
    if (!up_.at(i)) {
      return;
    }
    ++epoch_[i];
    arm(node, now);
  }
  std::optional<FailureStrike> peek() override {
    while (!heap_.empty() &&
           heap_.top().epoch != epoch_[static_cast<std::size_t>(heap_.top().node)]) {
      heap_.pop();
    }
    if (heap_.empty()) {
      return std::nullopt;
    }
    return FailureStrike{heap_.top().time, heap_.top().node, std::nullopt, std::nullopt};
  }
  void consume(SimTime) override {
    STRETCH_CHECK(peek().has_value(), "consume() without a pending strike");
    const auto node = static_cast<std::size_t>(heap_.top().node);
    heap_.pop();
    ++epoch_[node];  // nothing pending for it until it is renewed or comes back
  }

 private:
  struct Entry {
    SimTime time;
    std::int64_t node;
    std::uint64_t epoch;
    // Min-heap on (time, node): ties resolved by node index, deterministically.
    bool operator>(const Entry& o) const noexcept {
      return time > o.time || (time == o.time && node > o.node);
    }
  };
  void arm(std::int64_t node, SimTime now) {
    const double hours = rng_.weibull(shape_, scaleHours_);
    heap_.push(Entry{now + drawToNanos(hours), node, epoch_[static_cast<std::size_t>(node)]});
  }

  double shape_;
  double scaleHours_;
  std::vector<std::uint64_t> epoch_;
  std::vector<bool> up_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
  Rng rng_;
};

class TraceProcess final : public FailureProcess {
 public:
  explicit TraceProcess(std::vector<FailureStrike> strikes) : strikes_(std::move(strikes)) {
    std::stable_sort(
        strikes_.begin(), strikes_.end(),
        [](const FailureStrike& a, const FailureStrike& b) { return a.time < b.time; });
  }
  void nodeUp(std::int64_t, SimTime) override {}
  void nodeDown(std::int64_t, SimTime) override {}
  void nodeRenewed(std::int64_t, SimTime) override {}
  std::optional<FailureStrike> peek() override {
    if (next_ >= strikes_.size()) {
      return std::nullopt;
    }
    return strikes_[next_];
  }
  void consume(SimTime) override {
    STRETCH_CHECK(next_ < strikes_.size(), "consume() past the end of the trace");
    ++next_;
  }

 private:
  std::vector<FailureStrike> strikes_;
  std::size_t next_ = 0;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::unique_ptr<FailureProcess> makeExponentialProcess(std::int64_t nodeCount, double meanHours,
                                                       std::uint64_t seed) {
  return std::make_unique<ExponentialProcess>(nodeCount, meanHours, seed);
}

std::unique_ptr<FailureProcess> makeWeibullProcess(std::int64_t nodeCount, double meanHours,
                                                   double shape, std::uint64_t seed) {
  return std::make_unique<WeibullProcess>(nodeCount, meanHours, shape, seed);
}

std::unique_ptr<FailureProcess> makeTraceProcess(std::vector<FailureStrike> strikes) {
  return std::make_unique<TraceProcess>(std::move(strikes));
}

CauseSampler::CauseSampler(const std::vector<FailureCause>& causes, std::uint64_t seed)
    : rng_(seed) {
  double total = 0.0;
  for (const FailureCause& c : causes) {
    total += c.weight;
    cumulative_.push_back(total);
    lowerNames_.push_back(lower(c.name));
  }
}

std::optional<std::size_t> CauseSampler::sample() {
  if (cumulative_.empty()) {
    return std::nullopt;
  }
  const double x = rng_.uniform() * cumulative_.back();
  const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), x);
  const auto index = static_cast<std::size_t>(it - cumulative_.begin());
  return std::min(index, cumulative_.size() - 1);
}

std::optional<std::size_t> CauseSampler::find(const std::string& name) const {
  const std::string key = lower(name);
  for (std::size_t i = 0; i < lowerNames_.size(); ++i) {
    if (lowerNames_[i] == key) {
      return i;
    }
  }
  return std::nullopt;
}

}  // namespace stretch::sim
