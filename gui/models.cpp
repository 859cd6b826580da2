#include "gui/models.hpp"

#include <utility>

#include "sim/scheduler.hpp"

namespace stretch::gui {

int TableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int TableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(headers_.size());
}

QVariant TableModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  const auto& row = rows_[static_cast<std::size_t>(index.row())];
  if (static_cast<std::size_t>(index.column()) >= row.size()) {
    return {};
  }
  const Cell& cell = row[static_cast<std::size_t>(index.column())];
  switch (role) {
    case Qt::DisplayRole:
      return cell.text;
    case kValueRole:
      return cell.value.isValid() ? cell.value : QVariant(cell.text);
    case Qt::TextAlignmentRole:
      return cell.value.isValid() ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter))
                                  : QVariant(int(Qt::AlignLeft | Qt::AlignVCenter));
    default:
      return {};
  }
}

QVariant TableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= headers_.size()) {
    return QAbstractTableModel::headerData(section, orientation, role);
  }
  if (role == Qt::DisplayRole) {
    return headers_[section];
  }
  if (role == Qt::ToolTipRole && section < tips_.size() && !tips_[section].isEmpty()) {
    return tips_[section];
  }
  return {};
}

void TableModel::setCells(std::vector<std::vector<Cell>> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}

void TableModel::setHeaders(QStringList headers, QStringList tips) {
  headers_ = std::move(headers);
  tips_ = std::move(tips);
}

TableModel::Cell TableModel::number(double value, int decimals) {
  return {QString::number(value, 'f', decimals), value};
}

TableModel::Cell TableModel::integer(long long value) {
  return {QString::number(value), QVariant::fromValue<qlonglong>(value)};
}

TableModel::Cell TableModel::text(const QString& value) {
  return {value, {}};
}

WorldSizeModel::WorldSizeModel(QObject* parent) : TableModel(parent) {
  setHeaders({tr("World size"), tr("GPUs"), tr("Micro batch"), tr("Accumulation")},
             {tr("In the solver's units: GPUs for v0.1, data-parallel ranks for v0.2 and exact"),
              tr("World size times model_parallel_size"), tr("Samples per GPU per micro step"),
              tr("Gradient accumulation steps: batch / (micro batch x world size)")});
}

void WorldSizeModel::setRows(const std::vector<elasticity::WorldSizeRow>& rows) {
  std::vector<std::vector<Cell>> cells;
  cells.reserve(rows.size());
  for (const auto& r : rows) {
    cells.push_back({integer(r.worldSize), integer(r.gpus), integer(r.microBatch),
                     integer(r.gradientAccumulation)});
  }
  setCells(std::move(cells));
}

SummaryModel::SummaryModel(QObject* parent) : TableModel(parent) {
  setHeaders({tr("Metric"), tr("Mean"), tr("± 95 % CI"), tr("Min"), tr("Max")},
             {QString(), tr("Mean over the Monte Carlo replicas"),
              tr("Half-width of the 95 % confidence interval of the mean (Student's t: t(0.975, "
                 "n-1) s / sqrt(n))"),
              QString(), QString()});
}

void SummaryModel::clear() {
  setCells({});
}

void SummaryModel::setResult(const sim::MonteCarloResult& result) {
  struct Metric {
    const char* key;
    QString label;
    double scale;
    int decimals;
  };
  const Metric metrics[] = {
      {"ettr", tr("ETTR (%)"), 100.0, 2},
      {"simulated_hours", tr("Time to finish (h)"), 1.0, 2},
      {"useful_hours", tr("Useful training (h)"), 1.0, 2},
      {"lost_hours", tr("Lost to rollbacks (h)"), 1.0, 3},
      {"checkpoint_hours", tr("Checkpointing (h)"), 1.0, 3},
      {"startup_hours", tr("Starting workers (h)"), 1.0, 3},
      {"idle_hours", tr("No workers (h)"), 1.0, 3},
      {"failures", tr("Failures"), 1.0, 2},
      {"preemptions", tr("Preemptions"), 1.0, 2},
      {"restarts", tr("Restarts"), 1.0, 2},
      {"checkpoints", tr("Checkpoints"), 1.0, 1},
      {"steps", tr("Steps"), 1.0, 0},
      {"samples", tr("Samples"), 1.0, 0},
  };
  const auto values = result.metricValues();
  std::vector<std::vector<Cell>> cells;
  for (const Metric& m : metrics) {
    const auto it = values.find(m.key);
    if (it == values.end()) {
      continue;
    }
    const sim::MetricSummary s = sim::summarize(it->second);
    cells.push_back({text(m.label), number(s.mean * m.scale, m.decimals),
                     number(s.ci95 * m.scale, m.decimals), number(s.min * m.scale, m.decimals),
                     number(s.max * m.scale, m.decimals)});
  }
  setCells(std::move(cells));
}

ScaleModel::ScaleModel(QObject* parent) : TableModel(parent) {
  setHeaders({tr("GPUs"), tr("Nodes"), tr("Micro x accum."), tr("Step (s)"), tr("Samples/s"),
              tr("Job MTBF (h)"), tr("Interval (min)"), tr("ETTR (%)"), tr("± CI"),
              tr("Time to train (h)"), tr("GPU-hours"), tr("Cost")},
             {tr("World size: GPUs running workers (* = recommended)"), tr("Nodes rented"),
              tr("Micro batch per GPU x gradient accumulation steps"),
              tr("One optimizer step, compute and exposed communication"),
              tr("Failure-free throughput"), tr("Mean time between interruptions of the job"),
              tr("Daly's interval at this size, in whole steps"),
              tr("Effective training time ratio: useful / total time"),
              tr("Half-width of the 95 % confidence interval (Monte Carlo)"),
              tr("Hours to train the job's samples, failures included"), tr("Rented GPUs x hours"),
              tr("GPU-hours x the plan's price per GPU-hour")});
}

void ScaleModel::setRows(const std::vector<planner::ScaleRow>& rows, std::int64_t recommendedGpus) {
  std::vector<std::vector<Cell>> cells;
  for (const planner::ScaleRow& r : rows) {
    Cell gpus = integer(r.gpus);
    if (r.gpus == recommendedGpus) {
      gpus.text += QStringLiteral(" *");
    }
    auto optional = [](const std::optional<sim::MetricSummary>& m, int decimals) {
      return m ? number(m->mean, decimals) : text(QStringLiteral("-"));
    };
    cells.push_back(
        {gpus, integer(r.nodes),
         text(QStringLiteral("%1 x %2").arg(r.microBatch).arg(r.gradientAccumulation)),
         number(r.stepSeconds, 3), number(r.samplesPerSecond, 1), number(r.jobMtbfHours, 1),
         number(r.intervalMinutes, 1), number(100.0 * r.ettr.mean, 2),
         r.simulated ? number(100.0 * r.ettr.ci95, 2) : text(QStringLiteral("-")),
         optional(r.timeToTrainHours, 1), optional(r.gpuHours, 0), optional(r.cost, 2)});
  }
  setCells(std::move(cells));
}

IntervalModel::IntervalModel(QObject* parent) : TableModel(parent) {
  setHeaders({tr("Interval (min)"), tr("Analytic ETTR (%)"), tr("Simulated ETTR (%)"), tr("± CI"),
              tr("Point")},
             {tr("Time between checkpoints, in whole steps as the simulator saves"),
              tr("Daly's ETTR formula at this interval"),
              tr("Monte Carlo mean over the replicas (same failures at every interval)"),
              tr("Half-width of the 95 % confidence interval"),
              tr("young, daly, configured, grid or refine (the golden-section search)")});
}

void IntervalModel::setCurve(const std::vector<planner::IntervalPoint>& curve) {
  std::vector<std::vector<Cell>> cells;
  for (const planner::IntervalPoint& p : curve) {
    const bool simulated = p.ettr.mean > 0.0;
    cells.push_back({number(p.effectiveMinutes, 1), number(100.0 * p.analyticEttr, 2),
                     simulated ? number(100.0 * p.ettr.mean, 2) : text(QStringLiteral("-")),
                     simulated ? number(100.0 * p.ettr.ci95, 2) : text(QStringLiteral("-")),
                     text(QString::fromStdString(p.label))});
  }
  setCells(std::move(cells));
}

EventModel::EventModel(QObject* parent) : TableModel(parent) {
  setHeaders({tr("Time (h)"), tr("Event"), tr("World size"), tr("Step"), tr("Description")});
}

void EventModel::setEvents(const std::vector<sim::TimelineRecord>& events) {
  std::vector<std::vector<Cell>> cells;
  cells.reserve(events.size());
  for (const auto& e : events) {
    const std::string_view kind = sim::toString(e.kind);
    // The simulator names counter records after their kind: no need to say it twice.
    QString description = e.name == kind ? QString() : QString::fromStdString(e.name);
    if (!e.detail.empty()) {
      description += (description.isEmpty() ? QString() : QStringLiteral(": ")) +
                     QString::fromStdString(e.detail);
    }
    cells.push_back({number(sim::nanosToHours(e.time), 3),
                     text(QString::fromUtf8(kind.data(), static_cast<qsizetype>(kind.size()))),
                     integer(e.worldSize), integer(e.step), text(description)});
  }
  setCells(std::move(cells));
}

}  // namespace stretch::gui
