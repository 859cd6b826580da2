#pragma once
// The charts. Qt Charts is confined to charts.cpp: this header shows only QWidget subclasses, so
// the rest of the GUI (and its tests) never include <QtCharts>.
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

namespace stretch::gui {

// World size over time for one run, with markers for failures, checkpoints and restarts.
class TimelineChart : public QWidget {
  Q_OBJECT

 public:
  explicit TimelineChart(QWidget* parent = nullptr);
  ~TimelineChart() override;

  void setData(const TimelineData& data);
  void clear();
  // Points in the series named "World size", "Failures", "Checkpoints" or "Restarts"; -1 when
  // there is no such series.
  int pointCount(const QString& series) const;
  QImage render(const QSize& size) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Time to train and GPU-hours against the world size (the planner's scale table).
class ScaleChart : public QWidget {
  Q_OBJECT

 public:
  explicit ScaleChart(QWidget* parent = nullptr);
  ~ScaleChart() override;

  // Rows without a time to train (the job has no sample count) are left out.
  void setRows(const std::vector<planner::ScaleRow>& rows);
  void clear();
  // Points in "Time to train" or "GPU-hours"; -1 for another name.
  int pointCount(const QString& series) const;
  QImage render(const QSize& size) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ETTR against the checkpoint interval (the planner's sweep), with the marks of Young's, Daly's,
// the configured and the recommended interval.
class EttrChart : public QWidget {
  Q_OBJECT

 public:
  explicit EttrChart(QWidget* parent = nullptr);
  ~EttrChart() override;

  void setSection(const planner::CheckpointSection& section);
  void clear();
  // Points in "Simulated ETTR", "Analytic ETTR (Daly)", "Young", "Daly", "Configured",
  // "Recommended"; -1 for another name.
  int pointCount(const QString& series) const;
  QImage render(const QSize& size) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stretch::gui
