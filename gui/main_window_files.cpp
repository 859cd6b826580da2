// MainWindow, files and the window's state: opening, saving and the recent files list; tab
// names and selection, saved inputs and window state, closing, the shortcuts dialog.
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

namespace {

constexpr int kMaxRecentFiles = 8;
const char* const kTabNames[] = {"Config", "Scenario", "Results", "Timeline", "Scale", "Plan"};

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
