// The table models (gui/models.hpp), each under QAbstractItemModelTester, with no widgets.

#include "gui/models.hpp"

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QTest>

#include "gui/job_document.hpp"
#include "planner/plan.hpp"
#include "planner/plan_input.hpp"
#include "sim/monte_carlo.hpp"
#include "sim/scenario.hpp"
#include "tests/gui/gui_test_support.hpp"

namespace stretch::gui {

namespace {

QVariant value(const QAbstractItemModel& m, int row, int column) {
  return m.data(m.index(row, column), kValueRole);
}

QString text(const QAbstractItemModel& m, int row, int column) {
  return m.data(m.index(row, column), Qt::DisplayRole).toString();
}

sim::MonteCarloResult exampleRuns(std::int64_t seeds) {
  const sim::Scenario s = sim::loadScenario(test::fixture("gui/example_job.json").toStdString());
  sim::MonteCarloOptions o;
  o.seeds = seeds;
  o.threads = 1;
  return sim::runMonteCarlo(s, o);
}

}  // namespace

class ModelsTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void worldSizes() {
    WorldSizeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(model.rowCount(), 0);
    QCOMPARE(model.columnCount(), 4);
    QCOMPARE(model.headerData(3, Qt::Horizontal).toString(), QStringLiteral("Accumulation"));
    QVERIFY(!model.headerData(0, Qt::Horizontal, Qt::ToolTipRole).toString().isEmpty());

    const ElasticityView view = JobDocument().evaluateElasticity();
    QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
    model.setRows(view.rows);
    QCOMPARE(reset.count(), 1);
    QCOMPARE(model.rowCount(), static_cast<int>(view.rows.size()));
    for (int r = 0; r < model.rowCount(); ++r) {
      const auto& row = view.rows[static_cast<std::size_t>(r)];
      QCOMPARE(value(model, r, 0).toLongLong(), row.worldSize);
      QCOMPARE(value(model, r, 1).toLongLong(), row.gpus);
      QCOMPARE(value(model, r, 2).toLongLong(), row.microBatch);
      QCOMPARE(value(model, r, 3).toLongLong(), row.gradientAccumulation);
      // batch = micro batch x accumulation x world size, in every row.
      QCOMPARE(row.microBatch * row.gradientAccumulation * row.worldSize, view.finalBatchSize);
      QCOMPARE(text(model, r, 0), QString::number(row.worldSize));
    }
    QCOMPARE(model.data(model.index(0, 0), Qt::TextAlignmentRole).toInt(),
             int(Qt::AlignRight | Qt::AlignVCenter));
    model.setRows({});
    QCOMPARE(model.rowCount(), 0);
    QVERIFY(!model.index(0, 0).isValid());
  }

  void summary() {
    SummaryModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    const sim::MonteCarloResult result = exampleRuns(5);
    model.setResult(result);
    QVERIFY(model.rowCount() >= 10);
    QCOMPARE(model.columnCount(), 5);
    QCOMPARE(text(model, 0, 0), QStringLiteral("ETTR (%)"));
    const sim::MetricSummary ettr = sim::summarize(result.metricValues().at("ettr"));
    QCOMPARE(value(model, 0, 1).toDouble(), 100.0 * ettr.mean);
    QCOMPARE(value(model, 0, 2).toDouble(), 100.0 * ettr.ci95);
    QCOMPARE(value(model, 0, 3).toDouble(), 100.0 * ettr.min);
    QCOMPARE(value(model, 0, 4).toDouble(), 100.0 * ettr.max);
    QVERIFY(value(model, 0, 3).toDouble() <= value(model, 0, 1).toDouble());
    // Text cells have no number behind them: kValueRole falls back to the text.
    QCOMPARE(value(model, 0, 0).toString(), QStringLiteral("ETTR (%)"));
    model.clear();
    QCOMPARE(model.rowCount(), 0);
  }

  void scaleAndIntervals() {
    const planner::Plan plan = planner::makePlan(
        planner::loadPlanInput(test::fixture("gui/example_job.json").toStdString()));
    ScaleModel scale;
    QAbstractItemModelTester scaleTester(&scale,
                                         QAbstractItemModelTester::FailureReportingMode::QtTest);
    scale.setRows(plan.scale.rows, plan.recommendation.gpus);
    QCOMPARE(scale.rowCount(), static_cast<int>(plan.scale.rows.size()));
    QCOMPARE(scale.columnCount(), 12);
    int marked = 0;
    for (int r = 0; r < scale.rowCount(); ++r) {
      const planner::ScaleRow& row = plan.scale.rows[static_cast<std::size_t>(r)];
      QCOMPARE(value(scale, r, 0).toLongLong(), row.gpus);
      QCOMPARE(value(scale, r, 1).toLongLong(), row.nodes);
      QCOMPARE(value(scale, r, 7).toDouble(), 100.0 * row.ettr.mean);
      QVERIFY(row.timeToTrainHours);
      QCOMPARE(value(scale, r, 9).toDouble(), row.timeToTrainHours->mean);
      QCOMPARE(text(scale, r, 11), QStringLiteral("-"));  // no price given
      if (text(scale, r, 0).endsWith(QStringLiteral(" *"))) {
        ++marked;
        QCOMPARE(row.gpus, plan.recommendation.gpus);
      }
    }
    QCOMPARE(marked, 1);
    scale.setRows({});
    QCOMPARE(scale.rowCount(), 0);

    IntervalModel intervals;
    QAbstractItemModelTester intervalTester(&intervals,
                                            QAbstractItemModelTester::FailureReportingMode::QtTest);
    intervals.setCurve(plan.checkpoint.curve);
    QCOMPARE(intervals.rowCount(), static_cast<int>(plan.checkpoint.curve.size()));
    QVERIFY(intervals.rowCount() > 3);
    bool young = false;
    for (int r = 0; r < intervals.rowCount(); ++r) {
      const auto& p = plan.checkpoint.curve[static_cast<std::size_t>(r)];
      QCOMPARE(value(intervals, r, 0).toDouble(), p.effectiveMinutes);
      QCOMPARE(value(intervals, r, 1).toDouble(), 100.0 * p.analyticEttr);
      young = young || text(intervals, r, 4) == QStringLiteral("young");
    }
    QVERIFY(young);
  }

  void events() {
    EventModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    sim::TimelineRecord a;
    a.time = sim::hoursToNanos(1.5);
    a.kind = sim::TimelineKind::Failure;
    a.worldSize = 56;
    a.step = 1200;
    a.name = "failure on n3";
    a.detail = "node lost";
    sim::TimelineRecord b = a;
    b.kind = sim::TimelineKind::Checkpoint;
    b.name = "save step 1200";
    b.detail.clear();
    model.setEvents({a, b});
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(value(model, 0, 0).toDouble(), 1.5);
    QCOMPARE(text(model, 0, 1), QStringLiteral("failure"));
    QCOMPARE(value(model, 0, 2).toLongLong(), std::int64_t{56});
    QCOMPARE(text(model, 0, 4), QStringLiteral("failure on n3: node lost"));
    QCOMPARE(text(model, 1, 4), QStringLiteral("save step 1200"));
    QCOMPARE(model.data(model.index(0, 4), Qt::TextAlignmentRole).toInt(),
             int(Qt::AlignLeft | Qt::AlignVCenter));
  }
};

}  // namespace stretch::gui

QTEST_GUILESS_MAIN(stretch::gui::ModelsTest)
#include "models_test.moc"
