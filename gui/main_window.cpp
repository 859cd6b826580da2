#include "gui/main_window.hpp"

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
#include "gui/models.hpp"
#include "gui/sim_controller.hpp"
#include "planner/report.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"

namespace stretch::gui {

namespace {

constexpr int kMaxRecentFiles = 8;
const char* const kTabNames[] = {"Config", "Scenario", "Results", "Timeline", "Scale", "Plan"};

QString qs(std::string_view text) {
  return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
}

std::filesystem::path toPath(const QString& path) {
  return std::filesystem::path(path.toStdString());
}

QTableView* makeTable(QAbstractItemModel* model, QWidget* parent) {
  auto* view = new QTableView(parent);
  view->setModel(model);
  view->setAlternatingRowColors(true);
  view->setSelectionBehavior(QAbstractItemView::SelectRows);
  view->verticalHeader()->setVisible(false);
  view->verticalHeader()->setDefaultSectionSize(22);
  view->horizontalHeader()->setStretchLastSection(true);
  view->setEditTriggers(QAbstractItemView::NoEditTriggers);
  return view;
}

// Whether a JSON file is a scenario (a job) rather than a DeepSpeed config.
bool looksLikeScenario(const QString& path) {
  std::string text;
  try {
    text = readFile(toPath(path));
  } catch (const IoError&) {
    return false;
  }
  const auto json = nlohmann::json::parse(text, nullptr, false, true);
  return json.is_object() && (json.contains("job") || json.contains("cluster"));
}

}  // namespace

MainWindow::MainWindow(QSettings* settings, QWidget* parent)
    : QMainWindow(parent), settings_(settings), solverPool_(std::make_unique<QThreadPool>()) {
  solverPool_->setMaxThreadCount(1);
  worldSizes_ = new WorldSizeModel(this);
  summary_ = new SummaryModel(this);
  scale_ = new ScaleModel(this);
  events_ = new EventModel(this);
  intervals_ = new IntervalModel(this);
  controller_ = new SimulationController(this);
  connect(controller_, &SimulationController::progressed, this,
          [this](double fraction, const QString& stage) {
            progress_->setRange(0, 1000);
            progress_->setValue(static_cast<int>(std::lround(1000.0 * fraction)));
            progress_->setFormat(stage == QStringLiteral("simulate")
                                     ? tr("simulating %1 replicas: %p%").arg(seeds_->value())
                                     : tr("planning (%1): %p%").arg(stage));
          });
  connect(controller_, &SimulationController::finished, this, &MainWindow::onSimulationFinished);
  connect(controller_, &SimulationController::failed, this, [this](const QString& message) {
    onSimulationEnded(tr("Simulation failed: %1").arg(message));
  });
  connect(controller_, &SimulationController::cancelled, this,
          [this] { onSimulationEnded(tr("Simulation cancelled.")); });

  buildUi();
  buildMenus();
  if (settings_ != nullptr) {
    seeds_->setValue(settings_->value("inputs/seeds", 20).toInt());
    restoreWindowState();
  }
  setDocument(JobDocument());
}

MainWindow::~MainWindow() = default;

// ------------------------------------------------------------------------------------------
// Building the window

void MainWindow::buildUi() {
  tabs_ = new QTabWidget(this);
  setCentralWidget(tabs_);

  tabs_->addTab(buildConfigTab(), tr("Config"));
  tabs_->addTab(buildScenarioTab(), tr("Scenario"));
  tabs_->addTab(buildResultsTab(), tr("Results"));
  tabs_->addTab(buildTimelineTab(), tr("Timeline"));
  tabs_->addTab(buildScaleTab(), tr("Scale"));
  tabs_->addTab(buildPlanTab(), tr("Plan"));

  statusBar()->showMessage(tr("Ready"));
  updateRunControls();
}

// Config: the elasticity form and the valid world sizes table.
QWidget* MainWindow::buildConfigTab() {
  auto* config = new QWidget;
  auto* configLayout = new QHBoxLayout(config);
  auto* configForm = buildForm(FieldTarget::Config);
  configForm->setMaximumWidth(420);
  configLayout->addWidget(configForm);
  auto* tableSide = new QWidget;
  auto* tableLayout = new QVBoxLayout(tableSide);
  tableLayout->setContentsMargins(0, 0, 0, 0);
  elasticityStatus_ = new QLabel;
  elasticityStatus_->setObjectName("elasticityStatus");
  elasticityStatus_->setWordWrap(true);
  elasticityStatus_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  tableLayout->addWidget(elasticityStatus_);
  auto* worldTable = makeTable(worldSizes_, tableSide);
  worldTable->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  worldTable->setObjectName("worldSizeTable");
  tableLayout->addWidget(worldTable, 1);
  configWarnings_ = new QLabel;
  configWarnings_->setObjectName("configWarnings");
  configWarnings_->setWordWrap(true);
  configWarnings_->setStyleSheet("color: #8a6d00;");
  tableLayout->addWidget(configWarnings_);
  configLayout->addWidget(tableSide, 1);
  return config;
}

// Scenario: cluster, failures, checkpoints, and the run controls.
QWidget* MainWindow::buildScenarioTab() {
  auto* scenario = new QWidget;
  auto* scenarioLayout = new QVBoxLayout(scenario);
  auto* scenarioForm = buildForm(FieldTarget::Scenario);
  scenarioForm->setMaximumWidth(560);
  scenarioLayout->addWidget(scenarioForm);
  auto* runRow = new QHBoxLayout;
  runRow->addWidget(new QLabel(tr("Monte Carlo seeds")));
  seeds_ = new QSpinBox;
  seeds_->setObjectName("seeds");
  seeds_->setRange(1, 100000);
  seeds_->setValue(20);
  seeds_->setToolTip(tr("Replicas of the scenario, each with its own random failures"));
  runRow->addWidget(seeds_);
  simulateButton_ = new QPushButton(tr("&Simulate"));
  simulateButton_->setObjectName("simulate");
  simulateButton_->setToolTip(tr("Run the Monte Carlo (Ctrl+R)"));
  connect(simulateButton_, &QPushButton::clicked, this, [this] { simulate(); });
  runRow->addWidget(simulateButton_);
  cancelButton_ = new QPushButton(tr("Cancel"));
  cancelButton_->setObjectName("cancel");
  cancelButton_->setToolTip(tr("Stop the running simulation (Esc)"));
  connect(cancelButton_, &QPushButton::clicked, this, &MainWindow::cancelSimulation);
  runRow->addWidget(cancelButton_);
  progress_ = new QProgressBar;
  progress_->setObjectName("progress");
  progress_->setRange(0, 1);
  progress_->setValue(0);
  progress_->setTextVisible(true);
  runRow->addWidget(progress_, 1);
  scenarioLayout->addLayout(runRow);
  scenarioStatus_ = new QLabel;
  scenarioStatus_->setObjectName("scenarioStatus");
  scenarioStatus_->setWordWrap(true);
  scenarioStatus_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  scenarioLayout->addWidget(scenarioStatus_);
  scenarioLayout->addStretch(1);
  return scenario;
}

// Results: headline and the Monte Carlo summary.
QWidget* MainWindow::buildResultsTab() {
  auto* results = new QWidget;
  auto* resultsLayout = new QVBoxLayout(results);
  resultsHeadline_ = new QLabel(tr("Press Simulate to run the Monte Carlo."));
  resultsHeadline_->setObjectName("resultsHeadline");
  resultsHeadline_->setWordWrap(true);
  resultsHeadline_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  resultsLayout->addWidget(resultsHeadline_);
  auto* summaryTable = makeTable(summary_, results);
  summaryTable->setObjectName("summaryTable");
  summaryTable->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  resultsLayout->addWidget(summaryTable, 1);
  return results;
}

// Timeline: the chart of replica 0 and its events.
QWidget* MainWindow::buildTimelineTab() {
  auto* timeline = new QSplitter(Qt::Vertical);
  timelineChart_ = new TimelineChart(timeline);
  timelineChart_->setObjectName("timelineChart");
  timelineChart_->setMinimumHeight(260);
  auto* eventTable = makeTable(events_, timeline);
  eventTable->setObjectName("eventTable");
  eventTable->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  eventTable->horizontalHeader()->setStretchLastSection(true);
  timeline->addWidget(timelineChart_);
  timeline->addWidget(eventTable);
  timeline->setStretchFactor(0, 3);
  timeline->setStretchFactor(1, 1);
  return timeline;
}

// Scale: time to train and GPU-hours by world size.
QWidget* MainWindow::buildScaleTab() {
  auto* scaleTab = new QWidget;
  auto* scaleLayout = new QVBoxLayout(scaleTab);
  auto* scaleSplit = new QSplitter(Qt::Vertical);
  scaleChart_ = new ScaleChart(scaleSplit);
  scaleChart_->setObjectName("scaleChart");
  scaleChart_->setMinimumHeight(260);
  auto* scaleTable = makeTable(scale_, scaleSplit);
  scaleTable->setObjectName("scaleTable");
  scaleTable->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  scaleSplit->addWidget(scaleChart_);
  scaleSplit->addWidget(scaleTable);
  scaleSplit->setStretchFactor(0, 3);
  scaleSplit->setStretchFactor(1, 1);
  scaleLayout->addWidget(scaleSplit, 1);
  scaleNote_ = new QLabel;
  scaleNote_->setObjectName("scaleNote");
  scaleNote_->setWordWrap(true);
  scaleLayout->addWidget(scaleNote_);
  return scaleTab;
}

// Plan: the planner's recommendation, ETTR vs checkpoint interval, exports.
QWidget* MainWindow::buildPlanTab() {
  auto* planTab = new QWidget;
  auto* planLayout = new QVBoxLayout(planTab);
  recommendation_ =
      new QLabel(tr("Press Simulate: the planner recommends a world size, batch "
                    "split and checkpoint interval."));
  recommendation_->setObjectName("recommendation");
  recommendation_->setWordWrap(true);
  recommendation_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  planLayout->addWidget(recommendation_);
  auto* exportRow = new QHBoxLayout;
  exportConfigButton_ = new QPushButton(tr("Export config…"));
  exportConfigButton_->setObjectName("exportConfig");
  exportConfigButton_->setToolTip(tr("The DeepSpeed config that reproduces the recommendation"));
  connect(exportConfigButton_, &QPushButton::clicked, this, [this] { exportDialog(0); });
  exportReportButton_ = new QPushButton(tr("Export report…"));
  exportReportButton_->setObjectName("exportReport");
  exportReportButton_->setToolTip(
      tr("The whole plan as HTML (with charts), JSON, CSV or Markdown"));
  connect(exportReportButton_, &QPushButton::clicked, this, [this] { exportDialog(1); });
  auto* exportCharts = new QPushButton(tr("Export chart images…"));
  exportCharts->setObjectName("exportCharts");
  exportCharts->setToolTip(tr("timeline.png, scale.png and ettr_interval.png into a folder"));
  connect(exportCharts, &QPushButton::clicked, this, [this] { exportDialog(2); });
  exportRow->addWidget(exportConfigButton_);
  exportRow->addWidget(exportReportButton_);
  exportRow->addWidget(exportCharts);
  exportRow->addStretch(1);
  planLayout->addLayout(exportRow);
  auto* planSplit = new QSplitter(Qt::Horizontal);
  ettrChart_ = new EttrChart(planSplit);
  ettrChart_->setObjectName("ettrChart");
  ettrChart_->setMinimumSize(320, 240);
  auto* intervalTable = makeTable(intervals_, planSplit);
  intervalTable->setObjectName("intervalTable");
  intervalTable->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  intervalTable->setMinimumWidth(480);
  intervalTable->setMaximumWidth(560);
  planSplit->addWidget(ettrChart_);
  planSplit->addWidget(intervalTable);
  planSplit->setStretchFactor(0, 1);
  planSplit->setStretchFactor(1, 0);
  planLayout->addWidget(planSplit, 1);
  intervalNote_ = new QLabel;
  intervalNote_->setObjectName("intervalNote");
  intervalNote_->setWordWrap(true);
  intervalNote_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  planLayout->addWidget(intervalNote_);
  return planTab;
}

QWidget* MainWindow::buildForm(FieldTarget target) {
  auto* box = new QWidget;
  auto* form = new QFormLayout(box);
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  form->setVerticalSpacing(2);
  for (const FieldSpec& spec : fieldSpecs()) {
    if (spec.target != target) {
      continue;
    }
    FieldWidgets w;
    w.spec = &spec;
    const QString id = qs(spec.id);
    QWidget* editor = nullptr;
    switch (spec.kind) {
      case FieldKind::Flag: {
        w.check = new QCheckBox;
        connect(w.check, &QCheckBox::toggled, this, [this, &spec](bool on) {
          onFieldEdited(spec, on ? QStringLiteral("true") : QStringLiteral("false"));
        });
        editor = w.check;
        break;
      }
      case FieldKind::Choice:
      case FieldKind::Preset: {
        w.combo = new QComboBox;
        if (spec.kind == FieldKind::Choice) {
          w.combo->addItem(tr("(default: %1)").arg(qs(spec.defaultText)), QString());
          for (std::string_view c : spec.choices) {
            w.combo->addItem(qs(c), qs(c));
          }
        }
        connect(w.combo, &QComboBox::activated, this, [this, &spec, combo = w.combo](int index) {
          onFieldEdited(spec, combo->itemData(index).toString());
        });
        editor = w.combo;
        break;
      }
      case FieldKind::File: {
        w.line = new QLineEdit;
        w.line->setObjectName(id);
        auto* row = new QWidget;
        auto* rowLayout = new QHBoxLayout(row);
        rowLayout->setContentsMargins(0, 0, 0, 0);
        rowLayout->addWidget(w.line, 1);
        auto* browse = new QToolButton;
        browse->setText(QStringLiteral("…"));
        browse->setToolTip(tr("Choose a failure trace file"));
        connect(browse, &QToolButton::clicked, this, [this, &spec, line = w.line] {
          const QString file = QFileDialog::getOpenFileName(
              this, tr("Failure trace"), QString(), tr("Traces (*.csv *.json);;All files (*)"));
          if (!file.isEmpty()) {
            line->setText(file);
            onFieldEdited(spec, file);
          }
        });
        rowLayout->addWidget(browse);
        connect(w.line, &QLineEdit::textEdited, this,
                [this, &spec](const QString& text) { onFieldEdited(spec, text); });
        editor = row;
        break;
      }
      default: {
        w.line = new QLineEdit;
        connect(w.line, &QLineEdit::textEdited, this,
                [this, &spec](const QString& text) { onFieldEdited(spec, text); });
        editor = w.line;
        break;
      }
    }
    if (w.line != nullptr) {
      w.line->setObjectName(id);
      w.line->setPlaceholderText(
          spec.defaultText.empty() ? QString() : tr("default: %1").arg(qs(spec.defaultText)));
      w.line->setClearButtonEnabled(true);
    }
    if (w.combo != nullptr) {
      w.combo->setObjectName(id);
    }
    if (w.check != nullptr) {
      w.check->setObjectName(id);
    }
    editor->setToolTip(qs(spec.help));
    w.error = new QLabel;
    w.error->setObjectName(id + QStringLiteral(".error"));
    w.error->setWordWrap(true);
    w.error->setStyleSheet("color: #c0392b;");
    w.error->setTextInteractionFlags(Qt::TextSelectableByMouse);
    w.error->hide();
    auto* cell = new QWidget;
    auto* cellLayout = new QVBoxLayout(cell);
    cellLayout->setContentsMargins(0, 0, 0, 0);
    cellLayout->setSpacing(1);
    cellLayout->addWidget(editor);
    cellLayout->addWidget(w.error);
    auto* label = new QLabel(qs(spec.label));
    label->setToolTip(qs(spec.help));
    form->addRow(label, cell);
    fields_[std::string(spec.id)] = w;
  }
  return box;
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* newAction =
      file->addAction(tr("&New (bundled example)"), this, &MainWindow::newDocument);
  newAction->setShortcut(QKeySequence::New);
  QAction* open = file->addAction(tr("&Open Job…"), this, [this] { openDialog(false); });
  open->setShortcut(QKeySequence::Open);
  QAction* openConfig =
      file->addAction(tr("Open DeepSpeed &Config…"), this, [this] { openDialog(true); });
  openConfig->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O));
  recentMenu_ = file->addMenu(tr("Open &Recent"));
  file->addSeparator();
  QAction* saveAction = file->addAction(tr("&Save Job"), this, [this] { save(); });
  saveAction->setShortcut(QKeySequence::Save);
  QAction* saveAsAction = file->addAction(tr("Save Job &As…"), this, [this] { saveAs(); });
  saveAsAction->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_S));
  QAction* saveConfig =
      file->addAction(tr("Save DeepSpeed Con&fig As…"), this, &MainWindow::saveConfigAs);
  saveConfig->setShortcut(QKeySequence(Qt::CTRL | Qt::ALT | Qt::Key_S));
  file->addSeparator();
  QAction* exportConfigAction =
      file->addAction(tr("&Export Recommended Config…"), this, [this] { exportDialog(0); });
  exportConfigAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
  QAction* exportReportAction =
      file->addAction(tr("Export &Report…"), this, [this] { exportDialog(1); });
  exportReportAction->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E));
  QAction* exportChartsAction =
      file->addAction(tr("Export C&hart Images…"), this, [this] { exportDialog(2); });
  exportActions_ = {exportConfigAction, exportReportAction, exportChartsAction};
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Q));

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  simulateAction_ = run->addAction(tr("&Simulate"), this, [this] { simulate(); });
  simulateAction_->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_R), QKeySequence(Qt::Key_F5)});
  cancelAction_ = run->addAction(tr("&Cancel"), this, &MainWindow::cancelSimulation);
  cancelAction_->setShortcut(QKeySequence(Qt::Key_Escape));

  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (int i = 0; i < tabs_->count(); ++i) {
    QAction* a = view->addAction(tabs_->tabText(i), this, [this, i] { tabs_->setCurrentIndex(i); });
    a->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
  }

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  QAction* keys = help->addAction(tr("&Keyboard Shortcuts"), this, &MainWindow::showShortcuts);
  keys->setShortcut(QKeySequence::HelpContents);
  help->addAction(tr("&About"), this, [this] {
    QMessageBox::about(this, tr("About Stretch planner"),
                       tr("<b>stretch-planner</b><br>Plan elastic DeepSpeed-style training: valid "
                          "world sizes, checkpoint cost, failures and their price, simulated "
                          "with the real elastic agent and solver."));
  });
  rebuildRecentMenu();
}

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
    headline += tr("<br><b>Live recovery</b> (survivors keep training; %1 s to reconfigure): "
                   "%2. <b>Checkpoint-restart</b> (Daly's interval): %3. Live recovery gains "
                   "%4 ± %5 ETTR points (%6 fresh replicas each).")
                    .arg(rec.reconfigureSeconds, 0, 'g', 3)
                    .arg(mode(rec.live), mode(rec.checkpoint))
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

// ------------------------------------------------------------------------------------------
// Files

bool MainWindow::openFile(const QString& path, QString* error) {
  try {
    if (!QFileInfo(path).isFile()) {
      throw IoError(ErrorDetail{path.toStdString(), "(missing)", "an existing file"});
    }
    if (looksLikeScenario(path)) {
      setDocument(JobDocument::fromScenarioFile(toPath(path)));
    } else {
      JobDocument doc = document_;
      doc.loadConfigFile(toPath(path));
      setDocument(std::move(doc));
    }
  } catch (const std::exception& e) {
    const QString message = QString::fromStdString(e.what());
    if (error != nullptr) {
      *error = message;
    }
    statusBar()->showMessage(tr("Could not open %1: %2").arg(path, message));
    return false;
  }
  addRecentFile(QFileInfo(path).absoluteFilePath());
  statusBar()->showMessage(tr("Opened %1").arg(path));
  return true;
}

void MainWindow::newDocument() {
  setDocument(JobDocument());
  statusBar()->showMessage(tr("The bundled example job"));
}

void MainWindow::openDialog(bool config) {
  const QString path =
      QFileDialog::getOpenFileName(this, config ? tr("Open DeepSpeed config") : tr("Open job"),
                                   QString(), tr("JSON (*.json);;All files (*)"));
  if (path.isEmpty()) {
    return;
  }
  QString error;
  if (!openFile(path, &error)) {
    QMessageBox::warning(this, tr("Open"), error);
  }
}

bool MainWindow::save() {
  if (document_.scenarioPath().empty()) {
    return saveAs();
  }
  try {
    document_.saveScenario(document_.scenarioPath());
  } catch (const std::exception& e) {
    QMessageBox::warning(this, tr("Save"), QString::fromStdString(e.what()));
    return false;
  }
  modified_ = false;
  updateTitle();
  statusBar()->showMessage(
      tr("Saved %1").arg(QString::fromStdString(document_.scenarioPath().string())));
  return true;
}

bool MainWindow::saveAs() {
  const QString path =
      QFileDialog::getSaveFileName(this, tr("Save job"), QString(), tr("JSON (*.json)"));
  if (path.isEmpty()) {
    return false;
  }
  try {
    document_.saveScenario(toPath(path));
  } catch (const std::exception& e) {
    QMessageBox::warning(this, tr("Save"), QString::fromStdString(e.what()));
    return false;
  }
  addRecentFile(QFileInfo(path).absoluteFilePath());
  modified_ = false;
  updateTitle();
  statusBar()->showMessage(tr("Saved %1").arg(path));
  return true;
}

void MainWindow::saveConfigAs() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Save DeepSpeed config"), QString(),
                                                    tr("JSON (*.json)"));
  if (path.isEmpty()) {
    return;
  }
  try {
    document_.saveConfig(toPath(path));
  } catch (const std::exception& e) {
    QMessageBox::warning(this, tr("Save"), QString::fromStdString(e.what()));
    return;
  }
  statusBar()->showMessage(tr("Saved %1").arg(path));
}

QStringList MainWindow::recentFiles() const {
  return settings_ != nullptr ? settings_->value("recentFiles").toStringList() : QStringList();
}

void MainWindow::addRecentFile(const QString& path) {
  if (settings_ == nullptr) {
    return;
  }
  QStringList files = recentFiles();
  files.removeAll(path);
  files.prepend(path);
  while (files.size() > kMaxRecentFiles) {
    files.removeLast();
  }
  settings_->setValue("recentFiles", files);
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  recentMenu_->clear();
  const QStringList files = recentFiles();
  for (int i = 0; i < files.size(); ++i) {
    const QString path = files[i];
    QAction* a =
        recentMenu_->addAction(QStringLiteral("&%1 %2").arg(i + 1).arg(path), this, [this, path] {
          QString error;
          if (!openFile(path, &error)) {
            QMessageBox::warning(this, tr("Open"), error);
          }
        });
    a->setData(path);
  }
  recentMenu_->setEnabled(!files.isEmpty());
}

void MainWindow::updateTitle() {
  setWindowTitle(tr("%1%2 — Stretch planner")
                     .arg(QString::fromStdString(document_.name()))
                     .arg(modified_ ? QStringLiteral(" *") : QString()));
}

// ------------------------------------------------------------------------------------------
// Tabs, settings, shortcuts

QStringList MainWindow::tabNames() {
  QStringList names;
  for (const char* n : kTabNames) {
    names << QString::fromLatin1(n);
  }
  return names;
}

bool MainWindow::selectTab(const QString& name) {
  const QStringList names = tabNames();
  for (int i = 0; i < names.size(); ++i) {
    if (names[i].compare(name, Qt::CaseInsensitive) == 0) {
      tabs_->setCurrentIndex(i);
      return true;
    }
  }
  return false;
}

QString MainWindow::currentTabName() const {
  return tabNames().value(tabs_->currentIndex());
}

bool MainWindow::restoreLastInputs() {
  if (settings_ == nullptr || !settings_->contains("inputs/document")) {
    return false;
  }
  try {
    const std::string text = settings_->value("inputs/document").toString().toStdString();
    const std::string base = settings_->value("inputs/baseDir").toString().toStdString();
    JobDocument doc = JobDocument::fromScenarioText(text, base, "last session");
    doc.setScenarioPath(settings_->value("inputs/path").toString().toStdString());
    setDocument(std::move(doc));
  } catch (const std::exception&) {
    return false;  // a damaged entry: start from the example instead
  }
  return true;
}

void MainWindow::saveSettings() {
  if (settings_ == nullptr) {
    return;
  }
  settings_->setValue("window/geometry", saveGeometry());
  settings_->setValue("window/state", saveState());
  settings_->setValue("window/tab", tabs_->currentIndex());
  settings_->setValue("inputs/seeds", seeds_->value());
  settings_->setValue("inputs/document", QString::fromStdString(document_.scenarioText()));
  settings_->setValue("inputs/baseDir", QString::fromStdString(document_.baseDir().string()));
  settings_->setValue("inputs/path", QString::fromStdString(document_.scenarioPath().string()));
  settings_->sync();
}

void MainWindow::restoreWindowState() {
  if (settings_->contains("window/geometry")) {
    restoreGeometry(settings_->value("window/geometry").toByteArray());
  } else {
    resize(1180, 760);
  }
  restoreState(settings_->value("window/state").toByteArray());
  tabs_->setCurrentIndex(settings_->value("window/tab", 0).toInt());
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (controller_->isRunning()) {
    controller_->cancel();
  }
  saveSettings();
  event->accept();
}

void MainWindow::showShortcuts() {
  QMessageBox::information(
      this, tr("Keyboard shortcuts"),
      tr("<table>"
         "<tr><td>Ctrl+N</td><td>New job (the bundled example)</td></tr>"
         "<tr><td>Ctrl+O</td><td>Open job</td></tr>"
         "<tr><td>Ctrl+Shift+O</td><td>Open DeepSpeed config</td></tr>"
         "<tr><td>Ctrl+S / Ctrl+Shift+S</td><td>Save job / save job as</td></tr>"
         "<tr><td>Ctrl+Alt+S</td><td>Save DeepSpeed config as</td></tr>"
         "<tr><td>Ctrl+R, F5</td><td>Simulate</td></tr>"
         "<tr><td>Esc</td><td>Cancel the simulation</td></tr>"
         "<tr><td>Ctrl+E / Ctrl+Shift+E</td><td>Export the recommended config / the "
         "report</td></tr>"
         "<tr><td>Ctrl+1 … Ctrl+6</td><td>Config, Scenario, Results, Timeline, Scale, "
         "Plan</td></tr>"
         "<tr><td>Ctrl+Q</td><td>Quit</td></tr></table>"));
}

}  // namespace stretch::gui
