// Young's and Daly's formulas against the worked table of the reference notes
// (../shared/reference/simulator_anchors.md 4.1: M = 185.6 min, the Llama-3-like job MTBF).

#include "planner/analytic.hpp"

#include <cmath>

#include <gtest/gtest.h>

namespace stretch::planner {
namespace {

struct Row {
  double c, r, young, daly, ettr;
};

TEST(PlannerAnalytic, ReproducesTheWorkedTable) {
  constexpr double kM = 185.6;  // minutes
  for (const Row& row :
       {Row{0.5, 5, 13.6, 13.3, 0.904}, Row{1, 5, 19.3, 18.6, 0.876}, Row{5, 5, 43.1, 39.8, 0.765},
        Row{5, 15, 43.1, 39.8, 0.724}, Row{10, 15, 60.9, 54.4, 0.652}}) {
    SCOPED_TRACE(::testing::Message() << "C = " << row.c << ", R = " << row.r);
    EXPECT_NEAR(youngInterval(row.c, kM), row.young, 0.05);
    const double daly = dalyInterval(row.c, kM);
    EXPECT_NEAR(daly, row.daly, 0.05);
    EXPECT_NEAR(dalyEttr(daly, row.c, row.r, kM), row.ettr, 0.0005);
  }
}

TEST(PlannerAnalytic, DalyIsMWhenTheSaveCostsTwoMtbfs) {
  EXPECT_DOUBLE_EQ(dalyInterval(20.0, 10.0), 10.0);
  EXPECT_DOUBLE_EQ(dalyInterval(25.0, 10.0), 10.0);
  EXPECT_LT(dalyInterval(19.0, 10.0), 19.0);
}

TEST(PlannerAnalytic, NoFailuresMeansNoOptimum) {
  EXPECT_TRUE(std::isinf(youngInterval(1.0, kNoFailures)));
  EXPECT_TRUE(std::isinf(dalyInterval(1.0, kNoFailures)));
  EXPECT_TRUE(std::isinf(exactDalyOptimum(1.0, 5.0, kNoFailures)));
  EXPECT_DOUBLE_EQ(dalyEttr(9.0, 1.0, 5.0, kNoFailures), 0.9);
}

TEST(PlannerAnalytic, ExactOptimumBeatsTheClosedFormSlightly) {
  constexpr double kM = 185.6;
  const double daly = dalyInterval(1.0, kM);
  const double exact = exactDalyOptimum(1.0, 5.0, kM);
  EXPECT_GE(dalyEttr(exact, 1.0, 5.0, kM), dalyEttr(daly, 1.0, 5.0, kM));
  EXPECT_NEAR(exact / daly, 1.0, 0.05);  // Daly's formula is a good approximation for C << M
  EXPECT_GT(dalyEttr(exact, 1.0, 5.0, kM), dalyEttr(exact * 1.1, 1.0, 5.0, kM));
  EXPECT_GT(dalyEttr(exact, 1.0, 5.0, kM), dalyEttr(exact / 1.1, 1.0, 5.0, kM));
}

TEST(PlannerAnalytic, IntervalsAreWholeSteps) {
  EXPECT_EQ(intervalSteps(10.0, 3.0), 3);
  EXPECT_DOUBLE_EQ(quantizedInterval(10.0, 3.0), 9.0);
  EXPECT_EQ(intervalSteps(11.0, 3.0), 4);
  EXPECT_EQ(intervalSteps(1.0, 3.0), 1);  // at least one step
  EXPECT_EQ(intervalSteps(kNoFailures, 3.0), 0);
  EXPECT_TRUE(std::isinf(quantizedInterval(kNoFailures, 3.0)));
}

TEST(PlannerAnalytic, ZeroCheckpointCostMeansEveryStep) {
  EXPECT_DOUBLE_EQ(youngInterval(0.0, 100.0), 0.0);
  EXPECT_DOUBLE_EQ(dalyInterval(0.0, 100.0), 0.0);
  EXPECT_DOUBLE_EQ(dalyEttr(0.0, 0.0, 1.0, 100.0), 0.0);
}

}  // namespace
}  // namespace stretch::planner
