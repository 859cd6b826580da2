// MainWindow: construction and building the window (the tabs, the form, the menus). The
// document and the form are in main_window_form.cpp, the simulation and its results in
// main_window_simulation.cpp, files, tabs, settings and shortcuts in main_window_files.cpp.

#include "gui/main_window.hpp"

#include <cmath>
#include <fstream>
#include <limits>
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
#include "gui/main_window_detail.hpp"
#include "gui/models.hpp"
#include "gui/sim_controller.hpp"
#include "planner/report.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "sim/monte_carlo.hpp"

namespace stretch::gui {

using detail::qs;
using detail::toPath;

namespace {

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
  static_assert(sim::kMaxSeeds <= std::numeric_limits<int>::max());
  seeds_->setRange(1, static_cast<int>(sim::kMaxSeeds));  // what the simulator runs at most
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

}  // namespace stretch::gui
