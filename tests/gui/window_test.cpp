// The window under the offscreen platform (QTest): typing updates the valid world sizes table
// within 50 ms per edit, bad input shows the config layer's message at its field, a simulation
// fills the charts, Cancel stops one, settings persist, shortcuts switch tabs.

#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>

#include "gui/charts.hpp"
#include "gui/main_window.hpp"
#include "gui/models.hpp"
#include "gui/sim_controller.hpp"
#include "planner/plan_input.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/elasticity/solver.hpp"
#include "sim/monte_carlo.hpp"
#include "sim/scenario.hpp"
#include "tests/gui/gui_test_support.hpp"

namespace stretch::gui {

namespace {

// Types `text` into the line edit one key at a time and returns the slowest keystroke in ms
// (from the key press to the refreshed table), measured around the key event.
double typeSlowly(QLineEdit* line, const QString& text, double* windowMs) {
  double slowest = 0.0;
  for (const QChar c : text) {
    QElapsedTimer timer;
    timer.start();
    QTest::keyClick(line, c.toLatin1());
    slowest = std::max(slowest, static_cast<double>(timer.nsecsElapsed()) / 1e6);
    if (windowMs != nullptr) {
      *windowMs =
          std::max(*windowMs, static_cast<MainWindow*>(line->window())->lastEditMilliseconds());
    }
  }
  return slowest;
}

void clearLine(QLineEdit* line) {
  line->setFocus();
  line->selectAll();
  QTest::keyClick(line, Qt::Key_Backspace);
}

}  // namespace

class WindowTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void init() {
    QVERIFY(dir_.isValid());
    settings_ = std::make_unique<QSettings>(dir_.filePath("planner.ini"), QSettings::IniFormat);
    settings_->clear();
    window_ = std::make_unique<MainWindow>(settings_.get());
    window_->resize(1100, 700);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
  }

  void cleanup() {
    window_.reset();
    settings_.reset();
  }

  void typingUpdatesTheTableWithin50ms() {
    auto* micro = window_->findChild<QLineEdit*>("elasticity.micro_batch_sizes");
    QVERIFY(micro != nullptr);
    QCOMPARE(micro->text(), QStringLiteral("2, 4, 8"));
    const int before = window_->worldSizeModel().rowCount();
    QVERIFY(before > 0);
    clearLine(micro);
    double windowMs = 0.0;
    const double slowest = typeSlowly(micro, QStringLiteral("1, 3, 5"), &windowMs);
    // The table is the solver's for the typed section.
    config::ElasticityConfig e;
    e.enabled = true;
    e.maxTrainBatchSize = 4096;
    e.microBatchSizes = {1, 3, 5};
    e.minGpus = 8;
    e.maxGpus = 512;
    e.version = config::ElasticityVersion::V0_1;
    const auto plan = elasticity::computeElasticConfig(e);
    QCOMPARE(window_->worldSizeModel().rowCount(), static_cast<int>(plan.validWorldSizes.size()));
    QCOMPARE(window_->worldSizeModel()
                 .data(window_->worldSizeModel().index(0, 0), kValueRole)
                 .toLongLong(),
             plan.validWorldSizes.front());
    QVERIFY(window_->elasticityStatus().contains(QString::number(plan.finalBatchSize)));

    // The exact solver searches every batch up to the cap: the slow case.
    auto* version = window_->findChild<QComboBox*>("elasticity.version");
    QVERIFY(version != nullptr);
    const int exact = version->findData(QStringLiteral("exact"));
    QVERIFY(exact >= 0);
    version->setCurrentIndex(exact);
    Q_EMIT version->activated(exact);
    QVERIFY(window_->elasticityStatus().contains(QStringLiteral("exact")));
    auto* maxBatch = window_->findChild<QLineEdit*>("elasticity.max_train_batch_size");
    clearLine(maxBatch);
    const double slowestExact = typeSlowly(maxBatch, QStringLiteral("16384"), &windowMs);
    QVERIFY(window_->worldSizeModel().rowCount() > 0);
    qInfo(
        "slowest edit: %.2f ms (v0.1, micro batches), %.2f ms (exact, max batch 16384); "
        "inside the window's handler: %.2f ms",
        slowest, slowestExact, windowMs);
    QVERIFY2(slowest <= 50.0, qPrintable(QString::number(slowest)));
    QVERIFY2(slowestExact <= 50.0, qPrintable(QString::number(slowestExact)));
  }

  void wideExactSearchRunsOffTheGuiThread() {
    auto* version = window_->findChild<QComboBox*>("elasticity.version");
    const int exact = version->findData(QStringLiteral("exact"));
    version->setCurrentIndex(exact);
    Q_EMIT version->activated(exact);
    auto* maxBatch = window_->findChild<QLineEdit*>("elasticity.max_train_batch_size");
    clearLine(maxBatch);
    // 1e8 batch sizes: the exact solver needs most of a second, the keystroke does not wait.
    double windowMs = 0.0;
    const double slowest = typeSlowly(maxBatch, QStringLiteral("100000000"), &windowMs);
    qInfo(
        "slowest keystroke while typing a 1e8 exact cap: %.2f ms (printed, not asserted: a "
        "wall-time bound fails on a loaded machine; that the solve is still running when the "
        "typing returns is what shows it never ran on this thread)",
        slowest);
    QVERIFY(window_->elasticitySolving());
    QVERIFY(window_->elasticityStatus().contains(QStringLiteral("Solving")));
    QTRY_VERIFY_WITH_TIMEOUT(!window_->elasticitySolving(), 30000);
    QVERIFY(window_->worldSizeModel().rowCount() > 0);
    QVERIFY2(window_->elasticityStatus().contains(QStringLiteral("exact")),
             qPrintable(window_->elasticityStatus()));
    // A narrow cap again: synchronous, and it supersedes nothing left running.
    clearLine(maxBatch);
    QTest::keyClicks(maxBatch, QStringLiteral("4096"));
    QVERIFY(!window_->elasticitySolving());
    QVERIFY(window_->elasticityStatus().contains(QStringLiteral("exact")));
  }

  void invalidInputIsShownAtTheField() {
    auto* maxBatch = window_->findChild<QLineEdit*>("elasticity.max_train_batch_size");
    QVERIFY(maxBatch != nullptr);
    clearLine(maxBatch);
    QTest::keyClicks(maxBatch, QStringLiteral("40x"));
    const QString error = window_->fieldError("elasticity.max_train_batch_size");
    QVERIFY2(error.contains(QStringLiteral("elasticity.max_train_batch_size")), qPrintable(error));
    QVERIFY2(error.contains(QStringLiteral("\"40x\"")), qPrintable(error));
    auto* label = window_->findChild<QLabel*>("elasticity.max_train_batch_size.error");
    QVERIFY(label != nullptr && label->isVisible());
    QCOMPARE(window_->worldSizeModel().rowCount(), 0);
    // Other fields stay clean; fixing the value clears the error and brings the table back.
    QVERIFY(window_->fieldError("elasticity.micro_batch_sizes").isEmpty());
    QTest::keyClick(maxBatch, Qt::Key_Backspace);
    QVERIFY(window_->fieldError("elasticity.max_train_batch_size").isEmpty());
    QVERIFY(!label->isVisible());
    QVERIFY(window_->worldSizeModel().rowCount() > 0);

    // A scenario value: Simulate refuses and says why, at the field.
    auto* mtbf = window_->findChild<QLineEdit*>("failures.node_mtbf_hours");
    QVERIFY(mtbf != nullptr);
    clearLine(mtbf);
    QTest::keyClicks(mtbf, QStringLiteral("-3"));
    QVERIFY(window_->fieldError("failures.node_mtbf_hours").contains("node_mtbf_hours"));
    QVERIFY(!window_->simulate());
    QVERIFY(!window_->controller().isRunning());
  }

  void simulationFillsTheCharts() {
    window_->setSeeds(4);
    QSignalSpy finished(&window_->controller(), &SimulationController::finished);
    auto* simulate = window_->findChild<QPushButton*>("simulate");
    QVERIFY(simulate != nullptr && simulate->isEnabled());
    QTest::mouseClick(simulate, Qt::LeftButton);
    QVERIFY(finished.wait(60000));
    QCOMPARE(window_->summaryModel().data(window_->summaryModel().index(0, 0)).toString(),
             QStringLiteral("ETTR (%)"));
    QVERIFY(window_->eventModel().rowCount() > 0);
    QVERIFY(window_->scaleModel().rowCount() >= 2);
    QVERIFY(window_->timelineChart().pointCount("World size") > 2);
    QVERIFY(window_->timelineChart().pointCount("Checkpoints") > 10);
    QVERIFY(window_->timelineChart().pointCount("Failures") > 0);
    QVERIFY(window_->timelineChart().pointCount("Restarts") > 0);
    QVERIFY(window_->scaleChart().pointCount("Time to train") >= 2);
    QCOMPARE(window_->scaleChart().pointCount("GPU-hours"),
             window_->scaleChart().pointCount("Time to train"));
    QCOMPARE(window_->timelineChart().pointCount("No such series"), -1);
    QCOMPARE(window_->currentTabName(), QStringLiteral("Results"));
    const QImage chart = window_->timelineChart().render(QSize(400, 300));
    QCOMPARE(chart.size(), QSize(400, 300));
    QVERIFY(simulate->isEnabled());

    // The planner's part: ETTR vs interval with the Young/Daly marks, the recommendation.
    EttrChart& ettr = window_->ettrChart();
    QVERIFY(ettr.pointCount("Simulated ETTR") > 3);
    QVERIFY(ettr.pointCount("Analytic ETTR (Daly)") >= ettr.pointCount("Simulated ETTR"));
    QCOMPARE(ettr.pointCount("Young"), 2);
    QCOMPARE(ettr.pointCount("Daly"), 2);
    QCOMPARE(ettr.pointCount("Configured"), 2);
    QCOMPARE(ettr.pointCount("Recommended"), 2);
    QVERIFY(window_->intervalModel().rowCount() > 3);
    QVERIFY2(window_->recommendationText().contains(QStringLiteral("Recommended")),
             qPrintable(window_->recommendationText()));
    QVERIFY(window_->findChild<QPushButton*>("exportConfig")->isEnabled());
  }

  // A job with live recovery: the recommendation shows both recovery modes (planner section 6).
  void liveRecoveryIsComparedInTheRecommendation() {
    QString error;
    QVERIFY2(window_->openFile(test::fixture("plans/llama3_16k_live.json"), &error),
             qPrintable(error));
    window_->setSeeds(2);
    QSignalSpy finished(&window_->controller(), &SimulationController::finished);
    QVERIFY(window_->simulate());
    QVERIFY(finished.wait(120000));
    const QString text = window_->recommendationText();
    QVERIFY2(text.contains(QStringLiteral("Live recovery")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("Checkpoint-restart")), qPrintable(text));
    // 30 s assumed + the control plane's cost at the job's nodes (fixtures/control_plane/
    // dev_vm.json: measured at 256, 1,024 and 2,048 agents), and where that comes from, as the
    // planner's section 6 says it, then the wait before a node failure is noticed (the
    // benchmark's stop_noticed_s) and where that comes from. Computed from the fixture, so that
    // it holds when the benchmark file is replaced.
    const QRegularExpression atNodes(QStringLiteral("s to reconfigure at ([0-9]+) nodes: "));
    const QRegularExpressionMatch match = atNodes.match(text);
    QVERIFY2(match.hasMatch(), qPrintable(text));
    const std::int64_t nodes = match.captured(1).toLongLong();
    QCOMPARE(nodes, std::int64_t{2048});
    const sim::Scenario scenario =
        sim::loadScenario(test::fixture("plans/llama3_16k_live.json").toStdString());
    const sim::SecondsByNodes& reconfigure = scenario.job.recovery.reconfigureSeconds;
    const sim::SecondsByNodes& detection = scenario.job.failureDetectionSeconds;
    const QString expected =
        QStringLiteral("%1 s to reconfigure at %2 nodes: %3%4)")
            .arg(reconfigure.at(nodes), 0, 'g', 3)
            .arg(nodes)
            .arg(QString::fromStdString(reconfigure.describe(nodes)),
                 detection.at(nodes) > 0.0
                     ? QStringLiteral("; either mode first waits %1 s for a node failure to be "
                                      "noticed: %2")
                           .arg(detection.at(nodes), 0, 'g', 3)
                           .arg(QString::fromStdString(detection.describe(nodes)))
                     : QString());
    QVERIFY2(text.contains(expected), qPrintable(text + QStringLiteral("\nexpected: ") + expected));
    QVERIFY2(text.contains(QStringLiteral("30 s given, plus measured at ")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("(control plane on ")), qPrintable(text));
  }

  // A constant reconfiguration cost is said to be one (the example job, live, 12 s), and so is
  // the failure detection both modes wait for (5 s).
  void liveRecoveryWithAConstantCostSaysSo() {
    QFile example(test::fixture("gui/example_job.json"));
    QVERIFY(example.open(QIODevice::ReadOnly));
    QJsonObject root = QJsonDocument::fromJson(example.readAll()).object();
    QJsonObject job = root[QStringLiteral("job")].toObject();
    job[QStringLiteral("recovery")] = QJsonObject{{QStringLiteral("mode"), QStringLiteral("live")},
                                                  {QStringLiteral("reconfigure_seconds"), 12}};
    job[QStringLiteral("failure_detection_seconds")] = 5;
    root[QStringLiteral("job")] = job;
    const QString path = dir_.filePath("live_constant.json");
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(QJsonDocument(root).toJson());
    file.close();
    QString error;
    QVERIFY2(window_->openFile(path, &error), qPrintable(error));
    window_->setSeeds(2);
    QSignalSpy finished(&window_->controller(), &SimulationController::finished);
    QVERIFY(window_->simulate());
    QVERIFY(finished.wait(120000));
    const QString text = window_->recommendationText();
    const QRegularExpression line(QStringLiteral(
        "12 s to reconfigure at [0-9]+ nodes: given as a constant; either mode first waits 5 s "
        "for a node failure to be noticed: given as a constant\\)"));
    QVERIFY2(text.contains(line), qPrintable(text));
  }

  void exportsNeedAPlanThenWriteIt() {
    QTemporaryDir out;
    QString error;
    QVERIFY(!window_->exportConfig(out.filePath("ds.json"), &error));
    QVERIFY2(error.contains(QStringLiteral("Simulate")), qPrintable(error));
    QVERIFY(!window_->findChild<QPushButton*>("exportReport")->isEnabled());

    window_->setSeeds(2);
    QSignalSpy finished(&window_->controller(), &SimulationController::finished);
    QVERIFY(window_->simulate());
    QVERIFY(finished.wait(60000));

    const QString config = out.filePath("ds.json");
    QVERIFY2(window_->exportConfig(config, &error), qPrintable(error));
    const config::ParsedConfig parsed = config::loadConfig(config.toStdString());
    QVERIFY(parsed.config.elasticity.enabled);
    QCOMPARE(parsed.config.elasticity.maxTrainBatchSize, std::int64_t{4096});

    const QString html = out.filePath("plan.html");
    QVERIFY2(window_->exportReport(html, &error), qPrintable(error));
    QFile htmlFile(html);
    QVERIFY(htmlFile.open(QIODevice::ReadOnly));
    const QByteArray page = htmlFile.readAll();
    QVERIFY(page.contains("<svg"));
    const QString json = out.filePath("plan.json");
    QVERIFY2(window_->exportReport(json, &error), qPrintable(error));
    QFile jsonFile(json);
    QVERIFY(jsonFile.open(QIODevice::ReadOnly));
    QVERIFY(jsonFile.readAll().contains("stretch.plan/1"));
    QVERIFY(window_->exportReport(out.filePath("plan.csv"), &error));
    QVERIFY(QFileInfo(out.filePath("plan.csv")).size() > 0);

    QVERIFY2(window_->exportCharts(out.path(), &error), qPrintable(error));
    for (const char* name : {"timeline.png", "scale.png", "ettr_interval.png"}) {
      const QImage image(out.filePath(QString::fromLatin1(name)));
      QVERIFY2(!image.isNull(), name);
      QCOMPARE(image.size(), QSize(1000, 600));
    }
    QVERIFY(!window_->exportReport(QStringLiteral("/no/such/dir/plan.html"), &error));
    QVERIFY2(error.contains(QStringLiteral("/no/such/dir/plan.html")), qPrintable(error));
  }

  void cancelStopsARunAndTheWindowResponds() {
    // 2,048 nodes for 54 days: a few tenths of a second per replica, 1,000 replicas.
    QVERIFY(window_->openFile(test::fixture("scenarios/llama3_like.json")));
    window_->setSeeds(1000);
    QSignalSpy progressed(&window_->controller(), &SimulationController::progressed);
    QSignalSpy cancelled(&window_->controller(), &SimulationController::cancelled);
    QSignalSpy finished(&window_->controller(), &SimulationController::finished);
    QVERIFY(window_->simulate());
    QVERIFY(window_->controller().isRunning());
    QVERIFY(!window_->simulate());  // one at a time
    auto* cancel = window_->findChild<QPushButton*>("cancel");
    QVERIFY(cancel->isEnabled());
    // The event loop keeps running while the worker simulates: the progress arrives.
    QVERIFY(progressed.wait(20000));
    // Typing still works during the run.
    auto* nodes = window_->findChild<QLineEdit*>("cluster.nodes");
    QTest::keyClick(nodes, Qt::Key_End);
    QElapsedTimer timer;
    timer.start();
    QTest::mouseClick(cancel, Qt::LeftButton);
    QVERIFY(cancelled.wait(20000));
    qInfo("cancelled %lld ms after the click", static_cast<long long>(timer.elapsed()));
    QCOMPARE(finished.count(), 0);
    QVERIFY(!window_->controller().isRunning());
    QVERIFY(!window_->controller().result());
    QVERIFY(!cancel->isEnabled());
    QVERIFY(window_->findChild<QPushButton*>("simulate")->isEnabled());
    QCOMPARE(window_->summaryModel().rowCount(), 0);
  }

  void settingsAreRemembered() {
    const QString job = test::fixture("gui/example_job.json");
    QVERIFY(window_->openFile(job));
    window_->setSeeds(7);
    auto* maxBatch = window_->findChild<QLineEdit*>("elasticity.max_train_batch_size");
    clearLine(maxBatch);
    QTest::keyClicks(maxBatch, QStringLiteral("2048"));
    window_->selectTab("Scale");
    window_->close();
    window_.reset();

    MainWindow again(settings_.get());
    QCOMPARE(again.seeds(), 7);
    QCOMPARE(again.currentTabName(), QStringLiteral("Scale"));
    QCOMPARE(again.recentFiles().value(0), QFileInfo(job).absoluteFilePath());
    QVERIFY(again.restoreLastInputs());
    QCOMPARE(again.document().fieldText(*findField("elasticity.max_train_batch_size")),
             std::string("2048"));
    QCOMPARE(again.document().scenarioPath().string(), job.toStdString());
    QCOMPARE(again.findChild<QLineEdit*>("elasticity.max_train_batch_size")->text(),
             QStringLiteral("2048"));
  }

  // The seeds spin box goes as far as the simulator runs (sim::kMaxSeeds, the bound of `stretch
  // sim --seeds` and plan.seeds too), no further: it used to stop at a number of its own
  // (100,000) that nothing else shared.
  void seedsAreBoundedByTheSimulatorsMaximum() {
    auto* seeds = window_->findChild<QSpinBox*>("seeds");
    QVERIFY(seeds != nullptr);
    QCOMPARE(seeds->minimum(), 1);
    QCOMPARE(static_cast<std::int64_t>(seeds->maximum()), sim::kMaxSeeds);
    QCOMPARE(planner::kMaxSeeds, sim::kMaxSeeds);
    QVERIFY(&planner::kMaxSeeds == &sim::kMaxSeeds);  // one constant, not two equal ones
    window_->setSeeds(static_cast<int>(sim::kMaxSeeds));
    QCOMPARE(static_cast<std::int64_t>(window_->seeds()), sim::kMaxSeeds);
    window_->setSeeds(static_cast<int>(sim::kMaxSeeds) + 1);
    QCOMPARE(static_cast<std::int64_t>(window_->seeds()), sim::kMaxSeeds);
  }

  void recentFilesAreCappedAndDeduplicated() {
    const QStringList files = {test::fixture("gui/example_job.json"),
                               test::fixture("scenarios/daly_exponential.json"),
                               test::fixture("examples/ds_config_elastic.json")};
    for (int round = 0; round < 4; ++round) {
      for (const QString& f : files) {
        QVERIFY(window_->openFile(f));
      }
    }
    const QStringList recent = window_->recentFiles();
    QCOMPARE(recent.size(), 3);
    QCOMPARE(recent.front(), QFileInfo(files.back()).absoluteFilePath());
  }

  void opensConfigsAndRejectsBadFiles() {
    QVERIFY(window_->openFile(test::fixture("examples/ds_config_elastic.json")));
    QVERIFY(window_->document().configText().find("AdamW") != std::string::npos);
    QVERIFY(window_->worldSizeModel().rowCount() > 0);
    const std::string before = window_->document().scenarioText();
    QString error;
    QVERIFY(!window_->openFile(QStringLiteral("/no/such/file.json"), &error));
    QVERIFY2(error.contains(QStringLiteral("/no/such/file.json")), qPrintable(error));
    QVERIFY(!window_->openFile(test::fixture("configs/invalid"), &error));
    QCOMPARE(window_->document().scenarioText(), before);
  }

  void shortcutsAndTabs() {
    QTest::keySequence(window_.get(), QKeySequence(Qt::CTRL | Qt::Key_4));
    QCOMPARE(window_->currentTabName(), QStringLiteral("Timeline"));
    QTest::keySequence(window_.get(), QKeySequence(Qt::CTRL | Qt::Key_6));
    QCOMPARE(window_->currentTabName(), QStringLiteral("Plan"));
    QTest::keySequence(window_.get(), QKeySequence(Qt::CTRL | Qt::Key_1));
    QCOMPARE(window_->currentTabName(), QStringLiteral("Config"));
    QVERIFY(window_->selectTab("scale"));
    QCOMPARE(window_->currentTabName(), QStringLiteral("Scale"));
    QVERIFY(!window_->selectTab("nope"));
    window_->setSeeds(2);
    QSignalSpy finished(&window_->controller(), &SimulationController::finished);
    QTest::keySequence(window_.get(), QKeySequence(Qt::CTRL | Qt::Key_R));
    QVERIFY(finished.wait(60000));
    QVERIFY(window_->summaryModel().rowCount() > 0);
    // Ctrl+N: back to the bundled example, results cleared.
    QTest::keySequence(window_.get(), QKeySequence::New);
    QCOMPARE(window_->summaryModel().rowCount(), 0);
    QCOMPARE(window_->timelineChart().pointCount("World size"), 0);
    QCOMPARE(window_->ettrChart().pointCount("Young"), 0);
    QCOMPARE(window_->intervalModel().rowCount(), 0);
  }

 private:
  QTemporaryDir dir_;
  std::unique_ptr<QSettings> settings_;
  std::unique_ptr<MainWindow> window_;
};

}  // namespace stretch::gui

QTEST_MAIN(stretch::gui::WindowTest)
#include "window_test.moc"
