// MainWindow, the simulation: starting and cancelling it, showing its results (summary,
// timeline, scale table, plan), and exporting the config, the report and the charts.
// (Building the window is in main_window.cpp.)

#include <cmath>
#include <fstream>
#include <sstream>

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QCloseEvent>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QThreadPool>
#include <QToolButton>
#include <QVBoxLayout>
#include <nlohmann/json.hpp>

#include "gui/charts.hpp"
#include "gui/main_window.hpp"
#include "gui/main_window_detail.hpp"
#include "gui/models.hpp"
#include "gui/sim_controller.hpp"
#include "planner/report.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"

namespace stretch::gui {

using detail::qs;
using detail::toPath;

// ------------------------------------------------------------------------------------------
// Simulation

bool MainWindow::simulate() {
  if (controller_->isRunning()) {
    statusBar()->showMessage(tr("A simulation is already running."));
    return false;
  }
  ScenarioCheck check = document_.checkScenario();
  if (!check.input) {
    refreshScenario();
    statusBar()->showMessage(
        tr("Fix the scenario first: %1").arg(QString::fromStdString(check.error->message)));
    return false;
  }
  SimulationRequest request;
  request.input = std::move(*check.input);
  request.seeds = seeds_->value();
  if (!controller_->start(std::move(request))) {
    return false;
  }
  progress_->setRange(0, 0);  // busy until the first replica reports
  statusBar()->showMessage(tr("Simulating %1 replicas…").arg(seeds_->value()));
  updateRunControls();
  return true;
}

void MainWindow::cancelSimulation() {
  if (controller_->isRunning()) {
    controller_->cancel();
    statusBar()->showMessage(tr("Cancelling…"));
  }
}

void MainWindow::onSimulationFinished() {
  const auto result = controller_->result();
  const sim::MonteCarloResult& mc = result->monteCarlo;
  summary_->setResult(mc);
  events_->setEvents(result->timeline.events);
  timelineChart_->setData(result->timeline);
  showPlan(*result);

  const auto values = mc.metricValues();
  const sim::MetricSummary ettr = sim::summarize(values.at("ettr"));
  const sim::MetricSummary hours = sim::summarize(values.at("simulated_hours"));
  QStringList outcomes;
  for (const auto& [name, count] : mc.outcomes()) {
    outcomes << QStringLiteral("%1 %2").arg(count).arg(QString::fromStdString(name));
  }
  resultsHeadline_->setText(
      tr("<b>ETTR %1 % ± %2</b>, %3 h ± %4 per run (%5 replicas: %6). Simulated in %7 s.")
          .arg(100.0 * ettr.mean, 0, 'f', 2)
          .arg(100.0 * ettr.ci95, 0, 'f', 2)
          .arg(hours.mean, 0, 'f', 2)
          .arg(hours.ci95, 0, 'f', 2)
          .arg(mc.runs.size())
          .arg(outcomes.join(QStringLiteral(", ")))
          .arg(result->wallSeconds, 0, 'f', 2));
  if (tabs_->currentIndex() <= 1) {
    tabs_->setCurrentIndex(2);
  }
  onSimulationEnded(tr("Simulation finished: %1 replicas in %2 s.")
                        .arg(mc.runs.size())
                        .arg(result->wallSeconds, 0, 'f', 2));
  progress_->setValue(1);
  progress_->setFormat(tr("done"));
}

void MainWindow::onSimulationEnded(const QString& status) {
  statusBar()->showMessage(status);
  progress_->setRange(0, 1);
  progress_->setValue(0);
  progress_->setFormat(QStringLiteral("%p%"));
  updateRunControls();
}

void MainWindow::updateRunControls() {
  const bool running = controller_->isRunning();
  simulateButton_->setEnabled(!running);
  cancelButton_->setEnabled(running);
  if (simulateAction_ != nullptr) {
    simulateAction_->setEnabled(!running);
    cancelAction_->setEnabled(running);
  }
}

void MainWindow::clearResults() {
  summary_->clear();
  events_->setEvents({});
  timelineChart_->clear();
  scale_->setRows({});
  scaleChart_->clear();
  scaleNote_->hide();
  intervals_->setCurve({});
  ettrChart_->clear();
  intervalNote_->clear();
  recommendation_->setText(
      tr("Press Simulate: the planner recommends a world size, batch split "
         "and checkpoint interval."));
  resultsHeadline_->setText(tr("Press Simulate to run the Monte Carlo."));
  updateExportControls();
}

void MainWindow::showPlan(const SimulationResult& result) {
  if (!result.plan) {
    scale_->setRows({});
    scaleChart_->clear();
    intervals_->setCurve({});
    ettrChart_->clear();
    const QString why = tr("No plan: %1").arg(QString::fromStdString(result.planError));
    scaleNote_->setText(why);
    scaleNote_->show();
    recommendation_->setText(why.toHtmlEscaped());
    intervalNote_->clear();
    updateExportControls();
    return;
  }
  const planner::Plan& plan = *result.plan;
  const planner::Recommendation& r = plan.recommendation;
  scale_->setRows(plan.scale.rows, r.gpus);
  scaleChart_->setRows(plan.scale.rows);
  QString scaleText = plan.scale.monteCarlo
                          ? tr("Planner's scale table: Monte Carlo mean over %1 replicas per size")
                                .arg(plan.scale.seeds)
                          : tr("Planner's scale table: analytic (Daly's ETTR at Daly's interval)");
  scaleText += plan.scale.totalSamples
                   ? tr("; time to train %L1 samples. * marks the recommended size.")
                         .arg(*plan.scale.totalSamples)
                   : tr("; the job has no sample count, so no time to train (set Samples to "
                        "train).");
  scaleNote_->setText(scaleText);
  scaleNote_->show();
  intervals_->setCurve(plan.checkpoint.curve);
  ettrChart_->setSection(plan.checkpoint);
  const planner::CheckpointSection& c = plan.checkpoint;
  intervalNote_->setText(
      tr("At %1 GPUs: job MTBF %2 h, save %3 s, restart %4 s. Young %5 min, Daly %6 min%7. "
         "Interval: %8")
          .arg(c.gpus)
          .arg(c.jobMtbfHours, 0, 'f', 1)
          .arg(c.saveSeconds, 0, 'f', 0)
          .arg(c.restartSeconds, 0, 'f', 0)
          .arg(c.youngMinutes, 0, 'f', 1)
          .arg(c.dalyMinutes, 0, 'f', 1)
          .arg(c.simulated ? tr(", simulated optimum %1 min (%2 replicas)")
                                 .arg(c.simulatedOptimumMinutes, 0, 'f', 1)
                                 .arg(c.seeds)
                           : QString())
          .arg(QString::fromStdString(c.skipped.empty() ? c.reason : c.skipped)));
  QString headline =
      tr("<b>Recommended (%1): %2 GPUs on %3 nodes, micro batch %4 x %5 accumulation = global "
         "batch %6, checkpoint every %7 min (%8 steps).</b> Expected ETTR %9 %")
          .arg(QString::fromUtf8(planner::toString(r.objective).data(),
                                 static_cast<qsizetype>(planner::toString(r.objective).size())))
          .arg(r.gpus)
          .arg(r.nodes)
          .arg(r.microBatch)
          .arg(r.gradientAccumulation)
          .arg(r.batch)
          .arg(r.intervalMinutes, 0, 'f', 1)
          .arg(r.intervalSteps)
          .arg(100.0 * r.ettr, 0, 'f', 2);
  if (r.timeToTrainHours) {
    headline += tr(", time to train %1 h").arg(*r.timeToTrainHours, 0, 'f', 1);
  }
  if (r.gpuHours) {
    headline += tr(", %L1 GPU-hours").arg(*r.gpuHours, 0, 'f', 0);
  }
  headline += QStringLiteral(".<br>") + QString::fromStdString(r.reasons).toHtmlEscaped();
  if (const planner::RecoverySection& rec = plan.recovery; rec.compared) {
    // The planner's section 6: both recovery modes at the recommended size.
    auto mode = [&](const planner::RecoveryMode& m) {
      QString text = tr("checkpoint every %1 min: ETTR %2 ± %3 %")
                         .arg(m.intervalMinutes, 0, 'f', 1)
                         .arg(100.0 * m.ettr.mean, 0, 'f', 2)
                         .arg(100.0 * m.ettr.ci95, 0, 'f', 2);
      if (m.timeToTrainHours) {
        text += tr(", time to train %1 h").arg(*m.timeToTrainHours, 0, 'f', 1);
      }
      return text;
    };
    // The reconfiguration at the recommended size's nodes and where that figure comes from
    // (given as a constant, or measured at some node counts and extrapolated), as section 6 says;
    // and a node failure's detection, which both modes wait for, when the job pays one.
    QString detection;
    if (rec.detectionSeconds > 0.0) {
      detection = tr("; either mode first waits %1 s for a node failure to be noticed: %2")
                      .arg(rec.detectionSeconds, 0, 'g', 3)
                      .arg(QString::fromStdString(rec.detectionSource).toHtmlEscaped());
    }
    headline += tr("<br><b>Live recovery</b> (survivors keep training; %1 s to reconfigure at %2 "
                   "nodes: %3%4): %5. <b>Checkpoint-restart</b> (Daly's interval): %6. Live "
                   "recovery gains %7 ± %8 ETTR points (%9 fresh replicas each).")
                    .arg(rec.reconfigureSeconds, 0, 'g', 3)
                    .arg(rec.nodes)
                    .arg(QString::fromStdString(rec.reconfigureSource).toHtmlEscaped(), detection,
                         mode(rec.live), mode(rec.checkpoint))
                    .arg(100.0 * rec.gain.mean, 0, 'f', 2)
                    .arg(100.0 * rec.gain.ci95, 0, 'f', 2)
                    .arg(rec.seeds);
  }
  for (const std::string& w : plan.warnings) {
    headline += QStringLiteral("<br><span style='color:#8a6d00'>%1</span>")
                    .arg(QString::fromStdString(w).toHtmlEscaped());
  }
  recommendation_->setText(headline);
  updateExportControls();
}

QString MainWindow::recommendationText() const {
  return recommendation_->text();
}

void MainWindow::updateExportControls() {
  const auto result = controller_->result();
  const bool hasPlan = result && result->plan;
  exportConfigButton_->setEnabled(hasPlan);
  exportReportButton_->setEnabled(hasPlan);
  for (QAction* a : exportActions_) {
    a->setEnabled(hasPlan || a == exportActions_.value(2));
  }
}

bool MainWindow::exportConfig(const QString& path, QString* error) {
  const auto result = controller_->result();
  try {
    if (!result || !result->plan) {
      throw Error("no plan yet: press Simulate first");
    }
    JobDocument::writeText(toPath(path), result->plan->recommendation.configJson);
  } catch (const std::exception& e) {
    if (error != nullptr) {
      *error = QString::fromStdString(e.what());
    }
    return false;
  }
  statusBar()->showMessage(tr("Wrote the recommended config to %1").arg(path));
  return true;
}

bool MainWindow::exportReport(const QString& path, QString* error) {
  const auto result = controller_->result();
  try {
    if (!result || !result->plan) {
      throw Error("no plan yet: press Simulate first");
    }
    const std::string suffix = QFileInfo(path).suffix().toLower().toStdString();
    const auto format = planner::parseReportFormat(suffix).value_or(planner::ReportFormat::Table);
    JobDocument::writeText(toPath(path), planner::renderPlan(*result->plan, format));
  } catch (const std::exception& e) {
    if (error != nullptr) {
      *error = QString::fromStdString(e.what());
    }
    return false;
  }
  statusBar()->showMessage(tr("Wrote the report to %1").arg(path));
  return true;
}

bool MainWindow::exportCharts(const QString& folder, QString* error) {
  const QSize size(1000, 600);
  const std::pair<const char*, QImage> images[] = {{"timeline.png", timelineChart_->render(size)},
                                                   {"scale.png", scaleChart_->render(size)},
                                                   {"ettr_interval.png", ettrChart_->render(size)}};
  for (const auto& [name, image] : images) {
    const QString file = QDir(folder).filePath(QString::fromLatin1(name));
    if (!image.save(file, "png")) {
      if (error != nullptr) {
        *error = tr("%1: could not write the image").arg(file);
      }
      return false;
    }
  }
  statusBar()->showMessage(
      tr("Wrote timeline.png, scale.png and ettr_interval.png to %1").arg(folder));
  return true;
}

void MainWindow::exportDialog(int which) {
  QString path;
  if (which == 0) {
    path = QFileDialog::getSaveFileName(this, tr("Export recommended DeepSpeed config"),
                                        QStringLiteral("ds_config.json"), tr("JSON (*.json)"));
  } else if (which == 1) {
    path = QFileDialog::getSaveFileName(
        this, tr("Export report"), QStringLiteral("plan.html"),
        tr("HTML (*.html);;JSON (*.json);;CSV (*.csv);;Markdown (*.md);;Text table (*.txt)"));
  } else {
    path = QFileDialog::getExistingDirectory(this, tr("Folder for the chart images"));
  }
  if (path.isEmpty()) {
    return;
  }
  QString error;
  const bool ok = which == 0   ? exportConfig(path, &error)
                  : which == 1 ? exportReport(path, &error)
                               : exportCharts(path, &error);
  if (!ok) {
    QMessageBox::warning(this, tr("Export"), error);
  }
}

void MainWindow::setSeeds(int seeds) {
  seeds_->setValue(seeds);
}

int MainWindow::seeds() const {
  return seeds_->value();
}

}  // namespace stretch::gui
