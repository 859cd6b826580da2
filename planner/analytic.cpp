#include "planner/analytic.hpp"

#include <algorithm>
#include <cmath>

namespace stretch::planner {

double youngInterval(double checkpointCost, double mtbf) noexcept {
  if (std::isinf(mtbf)) {
    return kNoFailures;
  }
  return std::sqrt(2.0 * checkpointCost * mtbf);
}

double dalyInterval(double checkpointCost, double mtbf) noexcept {
  if (std::isinf(mtbf)) {
    return kNoFailures;
  }
  const double c = checkpointCost;
  if (c >= 2.0 * mtbf) {
    return mtbf;
  }
  const double ratio = c / (2.0 * mtbf);
  const double tau = std::sqrt(2.0 * c * mtbf) * (1.0 + std::sqrt(ratio) / 3.0 + ratio / 9.0) - c;
  return std::max(0.0, tau);
}

double dalyEttr(double interval, double checkpointCost, double restartCost, double mtbf) noexcept {
  if (!(interval > 0.0)) {
    return 0.0;
  }
  if (std::isinf(mtbf)) {
    return interval / (interval + checkpointCost);
  }
  // expm1 keeps precision when (tau + C) << M.
  const double denominator =
      mtbf * std::exp(restartCost / mtbf) * std::expm1((interval + checkpointCost) / mtbf);
  return denominator > 0.0 ? interval / denominator : 0.0;
}

double exactDalyOptimum(double checkpointCost, double restartCost, double mtbf) noexcept {
  if (std::isinf(mtbf)) {
    return kNoFailures;
  }
  // Search log(tau) over a range that surely holds the optimum: Daly's closed form is within a
  // factor of a few of it for any C, M.
  const double guess = std::max(dalyInterval(checkpointCost, mtbf), 1e-9 * mtbf);
  double lo = std::log(guess) - std::log(64.0);
  double hi = std::log(std::max(guess, mtbf)) + std::log(64.0);
  const double phi = (std::sqrt(5.0) - 1.0) / 2.0;
  auto f = [&](double x) { return dalyEttr(std::exp(x), checkpointCost, restartCost, mtbf); };
  double a = hi - phi * (hi - lo);
  double b = lo + phi * (hi - lo);
  double fa = f(a);
  double fb = f(b);
  for (int i = 0; i < 200 && hi - lo > 1e-12; ++i) {
    if (fa < fb) {
      lo = a;
      a = b;
      fa = fb;
      b = lo + phi * (hi - lo);
      fb = f(b);
    } else {
      hi = b;
      b = a;
      fb = fa;
      a = hi - phi * (hi - lo);
      fa = f(a);
    }
  }
  return std::exp((lo + hi) / 2.0);
}

std::int64_t intervalSteps(double interval, double stepTime) noexcept {
  if (!(stepTime > 0.0) || std::isinf(interval)) {
    return 0;
  }
  const double steps = std::min(interval / stepTime, 1e15);
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::llround(steps)));
}

double quantizedInterval(double interval, double stepTime) noexcept {
  if (!(stepTime > 0.0) || std::isinf(interval)) {
    return interval;
  }
  return static_cast<double>(intervalSteps(interval, stepTime)) * stepTime;
}

}  // namespace stretch::planner
