#pragma once
// The planner's window: the form (built from gui/job_document.hpp's field specs), the valid world
// sizes table, the Simulate / Cancel controls and the result tabs. It holds no planning logic:
// edits go to the JobDocument, verdicts come back from the config layer and the solver, long
// work goes through the SimulationController, results reach the views through the models.
//
// Tabs (names for selectTab and `--tab`): Config, Scenario, Results, Timeline, Scale, Plan.
// Persistence (when constructed with settings): recent files, window geometry and state, the
// current tab, the seed count and the last document (restored at the next start when no file is
// given).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <QMainWindow>
#include <QString>
#include <QStringList>

#include "gui/job_document.hpp"
#include "gui/simulation.hpp"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QMenu;
class QProgressBar;
class QPushButton;
class QSettings;
class QSpinBox;
class QTabWidget;
class QTableView;
class QThreadPool;

namespace stretch::gui {

class EttrChart;
class EventModel;
class IntervalModel;
class ScaleChart;
class ScaleModel;
class SimulationController;
class SummaryModel;
class TimelineChart;
class WorldSizeModel;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  // settings: where recent files, window state and the last inputs live (not owned; may be null:
  // nothing is read or written, as for --screenshot).
  explicit MainWindow(QSettings* settings, QWidget* parent = nullptr);
  ~MainWindow() override;

  // Opens a job (scenario) or a DeepSpeed config, told apart by content (a scenario has "job" or
  // "cluster"). On failure returns false, leaves the document as it was and sets *error.
  bool openFile(const QString& path, QString* error = nullptr);
  // Replaces the document (the form and every view follow).
  void setDocument(JobDocument document);
  const JobDocument& document() const noexcept { return document_; }
  // Restores the last session's document from the settings; false when there is none.
  bool restoreLastInputs();

  static QStringList tabNames();
  // Selects a tab by name, case-insensitively; false when there is no such tab.
  bool selectTab(const QString& name);
  QString currentTabName() const;

  // Starts the Monte Carlo with the current inputs; false (with the reason in the status line)
  // when the scenario is invalid or a run is in progress.
  bool simulate();
  void cancelSimulation();
  SimulationController& controller() noexcept { return *controller_; }

  void setSeeds(int seeds);
  int seeds() const;

  // Exports of the last plan (false with *error when there is none or the file cannot be
  // written): the recommended DeepSpeed config; the report, its format from the extension
  // (.html, .json, .csv, .md, else the terminal table); the charts as PNGs in a folder
  // (timeline.png, scale.png, ettr_interval.png).
  bool exportConfig(const QString& path, QString* error = nullptr);
  bool exportReport(const QString& path, QString* error = nullptr);
  bool exportCharts(const QString& folder, QString* error = nullptr);

  // For tests and the screenshot mode.
  WorldSizeModel& worldSizeModel() noexcept { return *worldSizes_; }
  SummaryModel& summaryModel() noexcept { return *summary_; }
  ScaleModel& scaleModel() noexcept { return *scale_; }
  EventModel& eventModel() noexcept { return *events_; }
  IntervalModel& intervalModel() noexcept { return *intervals_; }
  TimelineChart& timelineChart() noexcept { return *timelineChart_; }
  ScaleChart& scaleChart() noexcept { return *scaleChart_; }
  EttrChart& ettrChart() noexcept { return *ettrChart_; }
  QString recommendationText() const;
  // The error shown at a field ("" when none).
  QString fieldError(std::string_view id) const;
  // The message shown above the world sizes table, and the one in the Scenario tab.
  QString elasticityStatus() const;
  QString scenarioStatus() const;
  // Milliseconds the last config edit took in the window's handler (the table refreshed, or a
  // wide exact search handed to the solver thread).
  double lastEditMilliseconds() const noexcept { return lastEditMs_; }
  // True while a wide exact search runs off the GUI thread (the table follows when it ends).
  bool elasticitySolving() const noexcept { return solving_; }
  QStringList recentFiles() const;

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  struct FieldWidgets {
    const FieldSpec* spec = nullptr;
    QLineEdit* line = nullptr;
    QComboBox* combo = nullptr;
    QCheckBox* check = nullptr;
    QLabel* error = nullptr;
  };

  void buildUi();
  // One per tab: its page (not yet in the tab widget), with the members its views fill set.
  QWidget* buildConfigTab();
  QWidget* buildScenarioTab();
  QWidget* buildResultsTab();
  QWidget* buildTimelineTab();
  QWidget* buildScaleTab();
  QWidget* buildPlanTab();
  void buildMenus();
  QWidget* buildForm(FieldTarget target);
  void populateForm();
  void onFieldEdited(const FieldSpec& spec, const QString& text);
  void refreshElasticity();
  void applyElasticity(const ElasticityView& view, double ms);
  void refreshScenario();
  void updateFieldStates();
  void showFieldError(const FieldError* error, FieldTarget target);
  void onSimulationFinished();
  void onSimulationEnded(const QString& status);
  void updateRunControls();
  void clearResults();
  void showPlan(const SimulationResult& result);
  void updateExportControls();
  void exportDialog(int which);

  void newDocument();
  void openDialog(bool config);
  bool save();
  bool saveAs();
  void saveConfigAs();
  void addRecentFile(const QString& path);
  void rebuildRecentMenu();
  void updateTitle();
  void saveSettings();
  void restoreWindowState();
  void showShortcuts();

  QSettings* settings_;
  JobDocument document_;
  bool modified_ = false;
  double lastEditMs_ = 0.0;

  std::map<std::string, FieldWidgets, std::less<>> fields_;
  QTabWidget* tabs_ = nullptr;
  QLabel* elasticityStatus_ = nullptr;
  QLabel* configWarnings_ = nullptr;
  QLabel* scenarioStatus_ = nullptr;
  QLabel* resultsHeadline_ = nullptr;
  QLabel* scaleNote_ = nullptr;
  QLabel* recommendation_ = nullptr;
  QLabel* intervalNote_ = nullptr;
  QPushButton* exportConfigButton_ = nullptr;
  QPushButton* exportReportButton_ = nullptr;
  QList<QAction*> exportActions_;
  QSpinBox* seeds_ = nullptr;
  QPushButton* simulateButton_ = nullptr;
  QPushButton* cancelButton_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QMenu* recentMenu_ = nullptr;
  QAction* simulateAction_ = nullptr;
  QAction* cancelAction_ = nullptr;

  WorldSizeModel* worldSizes_ = nullptr;
  SummaryModel* summary_ = nullptr;
  ScaleModel* scale_ = nullptr;
  EventModel* events_ = nullptr;
  IntervalModel* intervals_ = nullptr;
  TimelineChart* timelineChart_ = nullptr;
  ScaleChart* scaleChart_ = nullptr;
  EttrChart* ettrChart_ = nullptr;
  SimulationController* controller_ = nullptr;

  // Wide exact searches run here, one at a time, newest first; declared last so that it is
  // destroyed (waiting for a running search) before anything its result would touch.
  std::uint64_t elasticityGeneration_ = 0;
  bool solving_ = false;
  std::unique_ptr<QThreadPool> solverPool_;
};

}  // namespace stretch::gui
