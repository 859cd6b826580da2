#pragma once
// The table models between the domain results and the views: flat, read-only
// QAbstractTableModels over plain values, replaced whole when a new result arrives (a model
// reset). No widgets here; tests/gui/models_test.cpp runs each through QAbstractItemModelTester.
//
// Roles: Qt::DisplayRole is the formatted text, kValueRole the raw number (double or qint64) for
// sorting, charts and tests, Qt::TextAlignmentRole right-aligns numbers, Qt::ToolTipRole explains
// a column where that helps.

#include <cstdint>
#include <vector>

#include <QAbstractTableModel>
#include <QString>
#include <QStringList>

#include "planner/plan.hpp"
#include "runtime/elasticity/solver.hpp"
#include "sim/monte_carlo.hpp"
#include "sim/timeline.hpp"

namespace stretch::gui {

inline constexpr int kValueRole = Qt::UserRole + 1;

// Base: fixed header, rows of cells; subclasses fill the cells.
class TableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  using QAbstractTableModel::QAbstractTableModel;

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 protected:
  struct Cell {
    QString text;
    QVariant value;  // the raw number; invalid for text cells
  };
  // Replaces every row (a model reset).
  void setCells(std::vector<std::vector<Cell>> rows);
  void setHeaders(QStringList headers, QStringList tips = {});
  static Cell number(double value, int decimals);
  static Cell integer(long long value);
  static Cell text(const QString& value);

 private:
  QStringList headers_;
  QStringList tips_;
  std::vector<std::vector<Cell>> rows_;
};

// The valid world sizes table: world size, GPUs, micro batch, gradient accumulation.
class WorldSizeModel final : public TableModel {
  Q_OBJECT

 public:
  explicit WorldSizeModel(QObject* parent = nullptr);
  void setRows(const std::vector<elasticity::WorldSizeRow>& rows);
};

// The Monte Carlo summary: one row per metric with mean, 95 % CI half-width, min and max.
class SummaryModel final : public TableModel {
  Q_OBJECT

 public:
  explicit SummaryModel(QObject* parent = nullptr);
  void setResult(const sim::MonteCarloResult& result);
  void clear();
};

// The planner's scale table (planner::ScaleSection): one row per candidate world size.
class ScaleModel final : public TableModel {
  Q_OBJECT

 public:
  explicit ScaleModel(QObject* parent = nullptr);
  // recommendedGpus marks its row ("*" in the first column's text).
  void setRows(const std::vector<planner::ScaleRow>& rows, std::int64_t recommendedGpus = 0);
};

// The planner's checkpoint-interval sweep (planner::CheckpointSection::curve).
class IntervalModel final : public TableModel {
  Q_OBJECT

 public:
  explicit IntervalModel(QObject* parent = nullptr);
  void setCurve(const std::vector<planner::IntervalPoint>& curve);
};

// The events of one run (failures, checkpoints, starts, size changes) in time order.
class EventModel final : public TableModel {
  Q_OBJECT

 public:
  explicit EventModel(QObject* parent = nullptr);
  void setEvents(const std::vector<sim::TimelineRecord>& events);
};

}  // namespace stretch::gui
