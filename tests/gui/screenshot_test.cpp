// `stretch-planner --job FILE --screenshot OUT.png --tab NAME` as a user runs it: the PNG exists,
// has the requested size, is small, and is not blank. Also --help and bad arguments.

#include <map>

#include <QFileInfo>
#include <QImage>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "tests/gui/gui_test_support.hpp"

namespace stretch::gui {

namespace {

struct Run {
  int exitCode = -1;
  QString out;
  QString err;
};

Run planner(const QStringList& args) {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("QT_QPA_PLATFORM", "offscreen");
  p.setProcessEnvironment(env);
  p.start(QStringLiteral(STRETCH_PLANNER_EXE), args);
  Run r;
  if (!p.waitForFinished(90000)) {
    p.kill();
    p.waitForFinished();
    return r;
  }
  r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  r.out = QString::fromLocal8Bit(p.readAllStandardOutput());
  r.err = QString::fromLocal8Bit(p.readAllStandardError());
  return r;
}

}  // namespace

class ScreenshotTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void screenshotOfEachTab_data() {
    QTest::addColumn<QString>("tab");
    for (const char* tab : {"Config", "Scenario", "Results", "Timeline", "Scale", "Plan"}) {
      QTest::newRow(tab) << QString::fromLatin1(tab);
    }
  }

  void screenshotOfEachTab() {
    QFETCH(QString, tab);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString png = dir.filePath(tab + ".png");
    const Run r = planner({"--job", test::fixture("gui/example_job.json"), "--screenshot", png,
                           "--tab", tab, "--seeds", "4", "--size", "900x600"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains(QStringLiteral("tab ") + tab), qPrintable(r.out));
    const QFileInfo info(png);
    QVERIFY(info.exists());
    QVERIFY2(info.size() < 200 * 1024, qPrintable(QString::number(info.size())));
    QImage image(png);
    QVERIFY(!image.isNull());
    QCOMPARE(image.size(), QSize(900, 600));
    // Not blank: many colours, and a good share of pixels differ from the background.
    std::map<QRgb, int> counts;
    for (int y = 0; y < image.height(); y += 2) {
      for (int x = 0; x < image.width(); x += 2) {
        ++counts[image.pixel(x, y)];
      }
    }
    int background = 0;
    int total = 0;
    for (const auto& [rgb, n] : counts) {
      background = std::max(background, n);
      total += n;
    }
    QVERIFY2(counts.size() >= 16, qPrintable(QString::number(counts.size())));
    const double foreground = 1.0 - static_cast<double>(background) / total;
    QVERIFY2(foreground > 0.03, qPrintable(QString::number(foreground)));
  }

  void invalidJobShowsItsErrorOrRefusesToRun() {
    QTemporaryDir dir;
    const QString png = dir.filePath("typo.png");
    const QString typo = test::fixture("gui/typo_job.json");
    // Without a run: the window with the config layer's message at the field.
    Run r = planner({"--job", typo, "--screenshot", png, "--tab", "Config", "--no-run"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY(!QImage(png).isNull());
    // With a run: nothing to simulate, exit 2 with that message.
    const QString refused = dir.filePath("refused.png");
    r = planner({"--job", typo, "--screenshot", refused});
    QCOMPARE(r.exitCode, 2);
    QVERIFY2(r.err.contains(QStringLiteral("elasticity.micro_batch_sizes[1] = \"4x\"")),
             qPrintable(r.err));
    QVERIFY(!QFileInfo::exists(refused));
  }

  void helpNeedsNoDisplay() {
    const Run r = planner({"--help"});
    QCOMPARE(r.exitCode, 0);
    QVERIFY(r.out.contains(QStringLiteral("--screenshot")));
    QVERIFY(r.out.contains(QStringLiteral("--tab")));
  }

  void badArgumentsExitWithTwo() {
    QTemporaryDir dir;
    const QString png = dir.filePath("x.png");
    Run r = planner(
        {"--job", test::fixture("gui/example_job.json"), "--screenshot", png, "--tab", "Nope"});
    QCOMPARE(r.exitCode, 2);
    QVERIFY2(r.err.contains(QStringLiteral("--tab Nope")), qPrintable(r.err));
    // At most the simulator's maximum of replicas (sim::kMaxSeeds), said before anything runs
    // (--no-run: before, 1000001 was taken and silently cut to the spin box's 100000).
    r = planner({"--job", test::fixture("gui/example_job.json"), "--screenshot", png, "--seeds",
                 "1000001", "--no-run"});
    QCOMPARE(r.exitCode, 2);
    QVERIFY2(r.err.contains(QStringLiteral("--seeds 1000001: expected an integer in [1, 1000000]")),
             qPrintable(r.err));
    r = planner({"--job", "/no/such/job.json", "--screenshot", png});
    QCOMPARE(r.exitCode, 2);
    QVERIFY2(r.err.contains(QStringLiteral("/no/such/job.json")), qPrintable(r.err));
    QVERIFY(!QFileInfo::exists(png));
  }
};

}  // namespace stretch::gui

QTEST_GUILESS_MAIN(stretch::gui::ScreenshotTest)
#include "screenshot_test.moc"
