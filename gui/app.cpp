#include "gui/app.hpp"

#include <cstdio>
#include <cstring>
#include <memory>

#include <QApplication>
#include <QCommandLineParser>
#include <QEventLoop>
#include <QImage>
#include <QImageWriter>
#include <QPixmap>
#include <QSettings>
#include <QStatusBar>
#include <QTimer>

#include "gui/main_window.hpp"
#include "gui/sim_controller.hpp"
#include "sim/monte_carlo.hpp"

namespace stretch::gui {

namespace {

int fail(const QString& message) {
  std::fprintf(stderr, "stretch-planner: %s\n", message.toLocal8Bit().constData());
  return 2;
}

void describe(QCommandLineParser& parser) {
  parser.setApplicationDescription(
      "Plan an elastic training job: edit its DeepSpeed config and scenario, see the valid world "
      "sizes, simulate failures and checkpoints (Monte Carlo), compare world sizes.");
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument("file", "A job (scenario JSON) or a DeepSpeed config to open.",
                               "[file]");
  parser.addOption({"job", "The job to open (same as FILE).", "file"});
  parser.addOption(
      {"screenshot", "Run the job's simulation, save the window to this PNG and exit.", "png"});
  parser.addOption({"tab",
                    "Tab to show: " + MainWindow::tabNames().join(", ") + " (default: Results).",
                    "name"});
  parser.addOption({"seeds", "Monte Carlo replicas for --screenshot (default 20).", "n", "20"});
  parser.addOption({"no-run",
                    "With --screenshot: render the inputs without simulating (an invalid job "
                    "shows its errors at the fields)."});
  parser.addOption({"size", "Window size for --screenshot (default 1180x760).", "WxH", "1180x760"});
}

bool wantsOnlyText(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    for (const char* flag : {"-h", "--help", "--help-all", "-v", "--version"}) {
      if (std::strcmp(argv[i], flag) == 0) {
        return true;
      }
    }
  }
  return false;
}

bool wantsScreenshot(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--screenshot", 12) == 0) {
      return true;
    }
  }
  return false;
}

int save(MainWindow& window, const QString& out, const QString& tab);

int screenshot(MainWindow& window, const QCommandLineParser& parser, const QString& file) {
  const QString out = parser.value("screenshot");
  const QString tab = parser.isSet("tab") ? parser.value("tab") : QStringLiteral("Results");
  if (!MainWindow::tabNames().contains(tab, Qt::CaseInsensitive)) {
    return fail(
        QStringLiteral("--tab %1: expected one of %2").arg(tab, MainWindow::tabNames().join(", ")));
  }
  bool ok = false;
  const int seeds = parser.value("seeds").toInt(&ok);
  if (!ok || seeds < 1 || seeds > sim::kMaxSeeds) {
    return fail(QStringLiteral("--seeds %1: expected an integer in [1, %2]")
                    .arg(parser.value("seeds"))
                    .arg(sim::kMaxSeeds));
  }
  const QStringList size = parser.value("size").split('x');
  const int w = size.value(0).toInt();
  const int h = size.value(1).toInt();
  if (size.size() != 2 || w < 200 || h < 200 || w > 8000 || h > 8000) {
    return fail(
        QStringLiteral("--size %1: expected WxH, each in [200, 8000]").arg(parser.value("size")));
  }
  QString error;
  if (!file.isEmpty() && !window.openFile(file, &error)) {
    return fail(QStringLiteral("%1: %2").arg(file, error));
  }
  window.setSeeds(seeds);
  window.resize(w, h);
  window.show();
  if (parser.isSet("no-run")) {
    return save(window, out, tab);
  }
  if (!window.simulate()) {
    return fail(window.statusBar()->currentMessage());
  }
  QEventLoop loop;
  QString failure;
  QObject::connect(&window.controller(), &SimulationController::finished, &loop, &QEventLoop::quit);
  QObject::connect(&window.controller(), &SimulationController::failed, &loop,
                   [&](const QString& m) {
                     failure = m;
                     loop.quit();
                   });
  QObject::connect(&window.controller(), &SimulationController::cancelled, &loop,
                   &QEventLoop::quit);
  loop.exec();
  if (!failure.isEmpty() || !window.controller().result()) {
    return fail(QStringLiteral("simulation failed: %1").arg(failure));
  }
  return save(window, out, tab);
}

int save(MainWindow& window, const QString& out, const QString& tab) {
  window.selectTab(tab);
  for (int i = 0; i < 5; ++i) {
    QApplication::processEvents();
  }
  const QImage image = window.grab().toImage().convertToFormat(QImage::Format_RGB32);
  QImageWriter writer(out, "png");
  writer.setCompression(100);  // Qt maps 0-100 to zlib 0-9
  if (!writer.write(image)) {
    return fail(QStringLiteral("%1: %2").arg(out, writer.errorString()));
  }
  std::printf("stretch-planner: wrote %s (%dx%d, tab %s)\n", out.toLocal8Bit().constData(),
              image.width(), image.height(), window.currentTabName().toLocal8Bit().constData());
  return 0;
}

}  // namespace

int runPlanner(int argc, char** argv) {
  QCoreApplication::setOrganizationName("Stretch");
  QCoreApplication::setApplicationName("stretch-planner");
  QCoreApplication::setApplicationVersion("0.1.0");
  if (wantsOnlyText(argc, argv)) {
    // --help and --version need no display.
    QCoreApplication app(argc, argv);
    QCommandLineParser parser;
    describe(parser);
    parser.process(app);  // prints and exits
    return 0;
  }
  if (wantsScreenshot(argc, argv) && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") &&
      qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY")) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
  }
  QApplication app(argc, argv);
  QCommandLineParser parser;
  describe(parser);
  parser.process(app);
  const QStringList positional = parser.positionalArguments();
  if (positional.size() > 1) {
    return fail(QStringLiteral("expected at most one file, got %1").arg(positional.join(' ')));
  }
  QString file = parser.value("job");
  if (file.isEmpty() && !positional.isEmpty()) {
    file = positional.front();
  }

  if (parser.isSet("screenshot")) {
    MainWindow window(nullptr);
    return screenshot(window, parser, file);
  }

  QSettings settings;
  MainWindow window(&settings);
  if (!file.isEmpty()) {
    QString error;
    if (!window.openFile(file, &error)) {
      return fail(QStringLiteral("%1: %2").arg(file, error));
    }
  } else {
    window.restoreLastInputs();
  }
  if (parser.isSet("tab") && !window.selectTab(parser.value("tab"))) {
    return fail(QStringLiteral("--tab %1: expected one of %2")
                    .arg(parser.value("tab"), MainWindow::tabNames().join(", ")));
  }
  window.show();
  return QApplication::exec();
}

}  // namespace stretch::gui
