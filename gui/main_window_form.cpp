// MainWindow, the document and the form: loading a document into the form, field edits,
// the elasticity solver's live view, the scenario check, field errors and states.
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
// The document and the form

void MainWindow::setDocument(JobDocument document) {
  document_ = std::move(document);
  modified_ = false;
  populateForm();
  clearResults();
  refreshElasticity();
  refreshScenario();
  updateTitle();
}

void MainWindow::populateForm() {
  for (auto& [id, w] : fields_) {
    const QString text = QString::fromStdString(document_.fieldText(*w.spec));
    if (w.line != nullptr) {
      const QSignalBlocker block(w.line);
      w.line->setText(text);
    } else if (w.check != nullptr) {
      const QSignalBlocker block(w.check);
      const QString value = text.isEmpty() ? qs(w.spec->defaultText) : text;
      w.check->setChecked(value == QStringLiteral("true"));
    } else if (w.combo != nullptr) {
      const QSignalBlocker block(w.combo);
      if (w.spec->kind == FieldKind::Preset) {
        w.combo->clear();
        w.combo->addItem(tr("(the scenario's own figures)"), QString());
        for (const std::string& name : document_.presetNames()) {
          w.combo->addItem(QString::fromStdString(name), QString::fromStdString(name));
        }
        if (!text.isEmpty() && w.combo->findData(text) < 0) {
          w.combo->addItem(text, text);
        }
      }
      const int index = w.combo->findData(text);
      w.combo->setCurrentIndex(index >= 0 ? index : 0);
    }
  }
  updateFieldStates();
}

void MainWindow::onFieldEdited(const FieldSpec& spec, const QString& text) {
  QElapsedTimer timer;
  timer.start();
  document_.setFieldText(spec, text.toStdString());
  modified_ = true;
  if (spec.target == FieldTarget::Config || spec.id.rfind("cluster.", 0) == 0) {
    refreshElasticity();  // v0.2 sizes its batch for the cluster's GPUs
  }
  refreshScenario();
  updateFieldStates();
  updateTitle();
  lastEditMs_ = static_cast<double>(timer.nsecsElapsed()) / 1e6;
}

void MainWindow::refreshElasticity() {
  const std::uint64_t generation = ++elasticityGeneration_;
  // The exact solver's time grows with its search range (~1 s at 1e8 batches): wide searches go
  // to the solver thread so that typing never waits; the newest edit wins.
  constexpr std::int64_t kSyncExactWidth = std::int64_t{1} << 21;
  if (document_.exactSearchWidth() > kSyncExactWidth) {
    solving_ = true;
    elasticityStatus_->setText(
        tr("Solving (the exact solver scans %L1 batch sizes)…").arg(document_.exactSearchWidth()));
    solverPool_->clear();  // a search not started yet is superseded
    solverPool_->start([this, generation, doc = document_] {
      QElapsedTimer timer;
      timer.start();
      ElasticityView view = doc.evaluateElasticity();
      const double ms = static_cast<double>(timer.nsecsElapsed()) / 1e6;
      QMetaObject::invokeMethod(
          this,
          [this, generation, view = std::move(view), ms] {
            if (generation == elasticityGeneration_) {
              solving_ = false;
              applyElasticity(view, ms);
            }
          },
          Qt::QueuedConnection);
    });
    return;
  }
  solving_ = false;
  QElapsedTimer timer;
  timer.start();
  const ElasticityView view = document_.evaluateElasticity();
  applyElasticity(view, static_cast<double>(timer.nsecsElapsed()) / 1e6);
}

void MainWindow::applyElasticity(const ElasticityView& view, double ms) {
  worldSizes_->setRows(view.rows);
  showFieldError(view.error ? &*view.error : nullptr, FieldTarget::Config);
  QString status;
  if (view.error) {
    status = view.error->field(FieldTarget::Config) != nullptr
                 ? tr("The elasticity section has an error (shown at its field).")
                 : tr("<span style='color:#c0392b'>%1</span>")
                       .arg(QString::fromStdString(view.error->message).toHtmlEscaped());
  } else if (!view.enabled) {
    status =
        tr("Elasticity is off: the job runs at one fixed world size. Tick <i>Elastic</i> "
           "to see the valid world sizes.");
  } else {
    const bool gpusAreRanks = view.version != config::ElasticityVersion::V0_1;
    status = tr("<b>Final batch %1</b>: %2 valid %3 (solver %4%5). Solved in %6 ms.")
                 .arg(view.finalBatchSize)
                 .arg(view.rows.size())
                 .arg(gpusAreRanks ? tr("data-parallel sizes") : tr("GPU counts"))
                 .arg(qs(config::toString(view.version)))
                 .arg(view.currentGpus > 0
                          ? tr(", sized for the cluster's %1 GPUs").arg(view.currentGpus)
                          : QString())
                 .arg(ms, 0, 'f', 2);
  }
  elasticityStatus_->setText(status);
  QStringList warnings;
  for (const std::string& w : view.warnings) {
    warnings << QString::fromStdString(w).toHtmlEscaped();
  }
  configWarnings_->setText(warnings.join("<br>"));
  configWarnings_->setVisible(!warnings.isEmpty());
}

void MainWindow::refreshScenario() {
  const ScenarioCheck check = document_.checkScenario();
  const FieldError* error = check.error ? &*check.error : nullptr;
  showFieldError(error, FieldTarget::Scenario);
  if (error != nullptr) {
    const bool atField = error->field(FieldTarget::Scenario) != nullptr;
    const bool inConfig = error->field(FieldTarget::Config) != nullptr;
    scenarioStatus_->setText(
        atField ? tr("The scenario has an error (shown at its field).")
        : inConfig
            ? tr("<span style='color:#c0392b'>The DeepSpeed config has an error: see the Config "
                 "tab.</span>")
            : tr("<span style='color:#c0392b'>%1</span>")
                  .arg(QString::fromStdString(error->message).toHtmlEscaped()));
  } else {
    const sim::Scenario& s = *check.scenario();
    QString text = tr("%1: %2 nodes x %3 GPUs (%4), failures: %5.")
                       .arg(QString::fromStdString(s.name))
                       .arg(s.cluster.nodes)
                       .arg(s.cluster.gpusPerNode)
                       .arg(QString::fromStdString(s.cluster.name))
                       .arg(qs(sim::toString(s.failures.model)));
    for (const std::string& w : s.warnings) {
      text += QStringLiteral("<br><span style='color:#8a6d00'>%1</span>")
                  .arg(QString::fromStdString(w).toHtmlEscaped());
    }
    scenarioStatus_->setText(text);
  }
  updateRunControls();
}

void MainWindow::showFieldError(const FieldError* error, FieldTarget target) {
  const FieldSpec* at = error != nullptr ? error->field(target) : nullptr;
  for (auto& [id, w] : fields_) {
    if (w.spec->target != target) {
      continue;
    }
    const bool here = at == w.spec;
    w.error->setText(here ? QString::fromStdString(error->message) : QString());
    w.error->setVisible(here);
    QWidget* editor = w.line != nullptr    ? static_cast<QWidget*>(w.line)
                      : w.combo != nullptr ? static_cast<QWidget*>(w.combo)
                                           : static_cast<QWidget*>(w.check);
    editor->setStyleSheet(here ? QStringLiteral("border: 1px solid #c0392b;") : QString());
  }
}

void MainWindow::updateFieldStates() {
  // Only the inputs the chosen failure model reads are editable.
  const std::string model = document_.fieldText(*findField("failures.model"));
  auto enable = [this](std::string_view id, bool on) {
    const auto it = fields_.find(id);
    if (it != fields_.end() && it->second.line != nullptr) {
      it->second.line->setEnabled(on);
    }
  };
  enable("failures.node_mtbf_hours", model == "exponential" || model == "weibull");
  enable("failures.shape", model == "weibull");
  enable("failures.trace_file", model == "trace");
  enable("failures.repair_hours", !model.empty() && model != "none");
}

QString MainWindow::fieldError(std::string_view id) const {
  const auto it = fields_.find(id);
  return it == fields_.end() || it->second.error->isHidden() ? QString() : it->second.error->text();
}

QString MainWindow::elasticityStatus() const {
  return elasticityStatus_->text();
}

QString MainWindow::scenarioStatus() const {
  return scenarioStatus_->text();
}

}  // namespace stretch::gui
