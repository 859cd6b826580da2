#pragma once
// The charts. Qt Charts is confined to charts.cpp: this header shows only QWidget subclasses (and
// declares QChart and QChartView without their definitions), so the rest of the GUI (and its
// tests) never include <QtCharts>.
//
// Each chart takes plain data (gui/simulation.hpp), draws it, shows a point's values in a tooltip
// when the mouse hovers over it, and reports how many points each series holds (for tests).

#include <memory>
#include <vector>

#include <QImage>
#include <QString>
#include <QWidget>

#include "gui/simulation.hpp"
#include "planner/plan.hpp"

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
QT_END_NAMESPACE

namespace stretch::gui {

// What the charts share: one QChart, shown in a QChartView that fills the widget; how many points
// a series holds; the chart drawn into an image.
class ChartWidget : public QWidget {
  Q_OBJECT

 public:
  // Points in the series named `series`; -1 when the chart has no series by that name.
  int pointCount(const QString& series) const;
  QImage render(const QSize& size) const;

 protected:
  // An empty chart titled `title`, already shown: the subclass adds its axes and series.
  ChartWidget(QWidget* parent, const QString& title);
  QChart* chart() const noexcept { return chart_; }

 private:
  QChart* chart_;  // owned by view_
  QChartView* view_;
};

// World size over time for one run, with markers for failures, checkpoints and restarts. Its
// series: "World size", "Failures", "Checkpoints", "Restarts".
class TimelineChart : public ChartWidget {
  Q_OBJECT

 public:
  explicit TimelineChart(QWidget* parent = nullptr);
  ~TimelineChart() override;

  void setData(const TimelineData& data);
  void clear();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Time to train and GPU-hours against the world size (the planner's scale table). Its series:
// "Time to train", "GPU-hours".
class ScaleChart : public ChartWidget {
  Q_OBJECT

 public:
  explicit ScaleChart(QWidget* parent = nullptr);
  ~ScaleChart() override;

  // Rows without a time to train (the job has no sample count) are left out.
  void setRows(const std::vector<planner::ScaleRow>& rows);
  void clear();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ETTR against the checkpoint interval (the planner's sweep), with the marks of Young's, Daly's,
// the configured and the recommended interval. Its series: "Simulated ETTR", "Analytic ETTR
// (Daly)", "Young", "Daly", "Configured", "Recommended".
class EttrChart : public ChartWidget {
  Q_OBJECT

 public:
  explicit EttrChart(QWidget* parent = nullptr);
  ~EttrChart() override;

  void setSection(const planner::CheckpointSection& section);
  void clear();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stretch::gui
