// The only file that includes Qt Charts (gui/charts.hpp says why).
#include "gui/charts.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include <QCursor>
#include <QPainter>
#include <QToolTip>
#include <QVBoxLayout>
#include <QtCharts/QAreaSeries>
#include <QtCharts/QChart>
#include <QtCharts/QChartView>
#include <QtCharts/QLegend>
#include <QtCharts/QLineSeries>
#include <QtCharts/QLogValueAxis>
#include <QtCharts/QScatterSeries>
#include <QtCharts/QValueAxis>

namespace stretch::gui {

namespace {

QChartView* makeView(QWidget* owner, QChart* chart) {
  auto* view = new QChartView(chart, owner);
  view->setRenderHint(QPainter::Antialiasing);
  auto* layout = new QVBoxLayout(owner);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(view);
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->setMargins(QMargins(4, 4, 4, 4));
  return view;
}

// Shows `text(index)` for the point of `series` nearest to the hovered point.
void tooltipOnHover(QXYSeries* series, std::function<QString(qsizetype)> text) {
  QObject::connect(series, &QXYSeries::hovered, series,
                   [series, text = std::move(text)](const QPointF& point, bool state) {
                     if (!state) {
                       QToolTip::hideText();
                       return;
                     }
                     const QList<QPointF> points = series->points();
                     qsizetype best = -1;
                     double bestDistance = 0.0;
                     for (qsizetype i = 0; i < points.size(); ++i) {
                       const double d = std::abs(points[i].x() - point.x()) +
                                        std::abs(points[i].y() - point.y());
                       if (best < 0 || d < bestDistance) {
                         best = i;
                         bestDistance = d;
                       }
                     }
                     if (best >= 0) {
                       QToolTip::showText(QCursor::pos(), text(best));
                     }
                   });
}

// Points of the chart's XY series named `name`; -1 when it has none by that name.
int xyPointCount(QChart* chart, const QString& name) {
  for (QAbstractSeries* s : chart->series()) {
    if (s->name() == name) {
      if (auto* xy = qobject_cast<QXYSeries*>(s)) {
        return static_cast<int>(xy->count());
      }
    }
  }
  return -1;
}

QImage renderView(QChartView* view, const QSize& size) {
  QImage image(size, QImage::Format_ARGB32_Premultiplied);
  image.fill(Qt::white);
  QPainter painter(&image);
  painter.setRenderHint(QPainter::Antialiasing);
  view->render(&painter, QRectF(QPointF(0, 0), QSizeF(size)), view->viewport()->rect());
  return image;
}

QScatterSeries* markers(const QString& name, QColor color, double size,
                        QScatterSeries::MarkerShape shape) {
  auto* s = new QScatterSeries;
  s->setName(name);
  s->setColor(color);
  s->setBorderColor(color.darker(130));
  s->setMarkerSize(size);
  s->setMarkerShape(shape);
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// What every chart shares

ChartWidget::ChartWidget(QWidget* parent, const QString& title)
    : QWidget(parent), chart_(new QChart) {
  chart_->setTitle(title);
  view_ = makeView(this, chart_);
}

int ChartWidget::pointCount(const QString& series) const {
  return xyPointCount(chart_, series);
}

QImage ChartWidget::render(const QSize& size) const {
  return renderView(view_, size);
}

// ---------------------------------------------------------------------------------------------
// Timeline

struct TimelineChart::Impl {
  QLineSeries* size = nullptr;
  QScatterSeries* failures = nullptr;
  QScatterSeries* checkpoints = nullptr;
  QScatterSeries* restarts = nullptr;
  QValueAxis* x = nullptr;
  QValueAxis* y = nullptr;
  TimelineData data;
};

TimelineChart::TimelineChart(QWidget* parent)
    : ChartWidget(parent, tr("One simulated run (replica 0)")), impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.size = new QLineSeries;
  d.size->setName(tr("World size"));
  QPen pen(QColor(0x1f, 0x77, 0xb4));
  pen.setWidthF(2.0);
  d.size->setPen(pen);
  d.checkpoints = markers(tr("Checkpoints"), QColor(0x2c, 0xa0, 0x2c), 5.0,
                          QScatterSeries::MarkerShapeRectangle);
  d.restarts =
      markers(tr("Restarts"), QColor(0xff, 0x7f, 0x0e), 10.0, QScatterSeries::MarkerShapeCircle);
  d.failures =
      markers(tr("Failures"), QColor(0xd6, 0x27, 0x28), 12.0, QScatterSeries::MarkerShapeCircle);
  d.x = new QValueAxis;
  d.x->setTitleText(tr("simulated time (h)"));
  d.x->setLabelFormat("%.0f");
  d.y = new QValueAxis;
  d.y->setTitleText(tr("GPUs"));
  d.y->setLabelFormat("%.0f");
  chart()->addAxis(d.x, Qt::AlignBottom);
  chart()->addAxis(d.y, Qt::AlignLeft);
  for (QXYSeries* s :
       std::initializer_list<QXYSeries*>{d.size, d.checkpoints, d.restarts, d.failures}) {
    chart()->addSeries(s);
    s->attachAxis(d.x);
    s->attachAxis(d.y);
  }

  tooltipOnHover(d.size, [this](qsizetype i) {
    const QPointF p = impl_->size->points().value(i);
    return tr("%1 h: %2 GPUs").arg(p.x(), 0, 'f', 2).arg(p.y(), 0, 'f', 0);
  });
  auto labelled = [this](QScatterSeries* series, const std::vector<TimelinePoint>* points,
                         QString what) {
    tooltipOnHover(series, [points, what](qsizetype i) {
      const auto& p = (*points)[static_cast<std::size_t>(i)];
      return QStringLiteral("%1 at %2 h (%3 GPUs)\n%4")
          .arg(what)
          .arg(p.hours, 0, 'f', 2)
          .arg(p.worldSize, 0, 'f', 0)
          .arg(QString::fromStdString(p.label));
    });
  };
  labelled(d.failures, &d.data.failures, tr("Failure"));
  labelled(d.checkpoints, &d.data.checkpoints, tr("Checkpoint"));
  labelled(d.restarts, &d.data.restarts, tr("Restart"));
}

TimelineChart::~TimelineChart() = default;

void TimelineChart::clear() {
  setData(TimelineData{});
}

void TimelineChart::setData(const TimelineData& timeline) {
  Impl& d = *impl_;
  d.data = timeline;
  const TimelineData& series = d.data;
  QList<QPointF> steps;
  double previous = 0.0;
  double top = 1.0;
  for (const TimelinePoint& p : series.worldSize) {
    if (!steps.isEmpty()) {
      steps.append(QPointF(p.hours, previous));
    }
    steps.append(QPointF(p.hours, p.worldSize));
    previous = p.worldSize;
    top = std::max(top, p.worldSize);
  }
  if (!steps.isEmpty()) {
    steps.append(QPointF(std::max(series.endHours, steps.back().x()), previous));
  }
  d.size->replace(steps);
  auto toPoints = [](const std::vector<TimelinePoint>& points) {
    QList<QPointF> out;
    out.reserve(static_cast<qsizetype>(points.size()));
    for (const TimelinePoint& p : points) {
      out.append(QPointF(p.hours, p.worldSize));
    }
    return out;
  };
  d.failures->replace(toPoints(series.failures));
  d.checkpoints->replace(toPoints(series.checkpoints));
  d.restarts->replace(toPoints(series.restarts));
  d.x->setRange(0.0, std::max(1.0, series.endHours));
  d.y->setRange(0.0, std::ceil(top * 1.15));
  d.x->applyNiceNumbers();
  d.y->applyNiceNumbers();
}

// ---------------------------------------------------------------------------------------------
// Scale

struct ScaleChart::Impl {
  QLineSeries* hours = nullptr;
  QLineSeries* gpuHours = nullptr;
  QLogValueAxis* x = nullptr;
  QValueAxis* yHours = nullptr;
  QValueAxis* yGpuHours = nullptr;
  std::vector<planner::ScaleRow> rows;
};

ScaleChart::ScaleChart(QWidget* parent)
    : ChartWidget(parent, tr("Time to train and GPU-hours by world size")),
      impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.hours = new QLineSeries;
  d.hours->setName(tr("Time to train"));
  d.hours->setPointsVisible(true);
  QPen hoursPen(QColor(0x1f, 0x77, 0xb4));
  hoursPen.setWidthF(2.0);
  d.hours->setPen(hoursPen);
  d.gpuHours = new QLineSeries;
  d.gpuHours->setName(tr("GPU-hours"));
  d.gpuHours->setPointsVisible(true);
  QPen gpuPen(QColor(0xd6, 0x27, 0x28));
  gpuPen.setWidthF(2.0);
  d.gpuHours->setPen(gpuPen);
  d.x = new QLogValueAxis;
  d.x->setBase(2.0);
  d.x->setLabelFormat("%g");
  d.x->setTitleText(tr("GPUs (log scale)"));
  d.yHours = new QValueAxis;
  d.yHours->setTitleText(tr("time to train (h)"));
  d.yHours->setLabelFormat("%.0f");
  d.yGpuHours = new QValueAxis;
  d.yGpuHours->setTitleText(tr("GPU-hours"));
  d.yGpuHours->setLabelFormat("%.0f");
  chart()->addAxis(d.x, Qt::AlignBottom);
  chart()->addAxis(d.yHours, Qt::AlignLeft);
  chart()->addAxis(d.yGpuHours, Qt::AlignRight);
  chart()->addSeries(d.hours);
  chart()->addSeries(d.gpuHours);
  d.hours->attachAxis(d.x);
  d.hours->attachAxis(d.yHours);
  d.gpuHours->attachAxis(d.x);
  d.gpuHours->attachAxis(d.yGpuHours);

  auto describe = [this](qsizetype i) {
    const planner::ScaleRow& r = impl_->rows[static_cast<std::size_t>(i)];
    return tr("%1 GPUs on %2 nodes (micro %3 x %4)\ntime to train %5 h (± %6)\n"
              "%7 GPU-hours, ETTR %8 %\njob MTBF %9 h")
        .arg(r.gpus)
        .arg(r.nodes)
        .arg(r.microBatch)
        .arg(r.gradientAccumulation)
        .arg(r.timeToTrainHours->mean, 0, 'f', 1)
        .arg(r.timeToTrainHours->ci95, 0, 'f', 1)
        .arg(r.gpuHours ? r.gpuHours->mean : 0.0, 0, 'f', 0)
        .arg(100.0 * r.ettr.mean, 0, 'f', 2)
        .arg(r.jobMtbfHours, 0, 'f', 1);
  };
  tooltipOnHover(d.hours, describe);
  tooltipOnHover(d.gpuHours, describe);
}

ScaleChart::~ScaleChart() = default;

void ScaleChart::clear() {
  setRows({});
}

void ScaleChart::setRows(const std::vector<planner::ScaleRow>& rows) {
  Impl& d = *impl_;
  d.rows.clear();
  for (const planner::ScaleRow& r : rows) {
    if (r.gpus > 0 && r.timeToTrainHours) {
      d.rows.push_back(r);
    }
  }
  std::sort(d.rows.begin(), d.rows.end(),
            [](const auto& a, const auto& b) { return a.gpus < b.gpus; });
  QList<QPointF> hours;
  QList<QPointF> gpuHours;
  double lo = 1.0, hi = 2.0, topHours = 1.0, topGpu = 1.0;
  for (const planner::ScaleRow& r : d.rows) {
    const auto x = static_cast<double>(r.gpus);
    hours.append(QPointF(x, r.timeToTrainHours->mean));
    gpuHours.append(QPointF(x, r.gpuHours ? r.gpuHours->mean : 0.0));
    topHours = std::max(topHours, r.timeToTrainHours->mean);
    topGpu = std::max(topGpu, r.gpuHours ? r.gpuHours->mean : 0.0);
  }
  if (!d.rows.empty()) {
    lo = static_cast<double>(d.rows.front().gpus) / 1.5;
    hi = static_cast<double>(d.rows.back().gpus) * 1.5;
  }
  d.hours->replace(hours);
  d.gpuHours->replace(gpuHours);
  d.x->setRange(lo, hi);
  d.yHours->setRange(0.0, topHours * 1.1);
  d.yGpuHours->setRange(0.0, topGpu * 1.1);
  d.yHours->applyNiceNumbers();
  d.yGpuHours->applyNiceNumbers();
}

// ---------------------------------------------------------------------------------------------
// ETTR vs checkpoint interval

struct EttrChart::Impl {
  QLineSeries* simulated = nullptr;
  QLineSeries* upper = nullptr;
  QLineSeries* lower = nullptr;
  QAreaSeries* band = nullptr;
  QLineSeries* analytic = nullptr;
  // Vertical marks: Young, Daly, Configured, Recommended.
  std::vector<std::pair<QLineSeries*, double>> marks;
  QLogValueAxis* x = nullptr;
  QValueAxis* y = nullptr;
  std::vector<planner::IntervalPoint> simulatedPoints;
  std::vector<planner::IntervalPoint> analyticPoints;
};

EttrChart::EttrChart(QWidget* parent)
    : ChartWidget(parent, tr("ETTR vs checkpoint interval at the recommended world size")),
      impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.simulated = new QLineSeries;
  d.simulated->setName(tr("Simulated ETTR"));
  d.simulated->setPointsVisible(true);
  QPen simPen(QColor(0x1f, 0x77, 0xb4));
  simPen.setWidthF(2.0);
  d.simulated->setPen(simPen);
  d.upper = new QLineSeries;
  d.lower = new QLineSeries;
  d.band = new QAreaSeries(d.upper, d.lower);
  d.band->setName(tr("95 % CI"));
  d.band->setColor(QColor(0x1f, 0x77, 0xb4, 50));
  d.band->setBorderColor(QColor(0x1f, 0x77, 0xb4, 80));
  d.analytic = new QLineSeries;
  d.analytic->setName(tr("Analytic ETTR (Daly)"));
  QPen analyticPen(QColor(0x7f, 0x7f, 0x7f));
  analyticPen.setWidthF(1.5);
  analyticPen.setStyle(Qt::DashLine);
  d.analytic->setPen(analyticPen);
  d.x = new QLogValueAxis;
  d.x->setBase(2.0);
  d.x->setLabelFormat("%g");
  d.x->setTitleText(tr("checkpoint interval (min, log scale)"));
  d.y = new QValueAxis;
  d.y->setTitleText(tr("ETTR (%)"));
  d.y->setLabelFormat("%.1f");
  chart()->addAxis(d.x, Qt::AlignBottom);
  chart()->addAxis(d.y, Qt::AlignLeft);
  for (QAbstractSeries* s :
       std::initializer_list<QAbstractSeries*>{d.band, d.analytic, d.simulated}) {
    chart()->addSeries(s);
    s->attachAxis(d.x);
    s->attachAxis(d.y);
  }
  const std::pair<QString, QColor> markSpecs[] = {{tr("Young"), QColor(0xff, 0x7f, 0x0e)},
                                                  {tr("Daly"), QColor(0xd6, 0x27, 0x28)},
                                                  {tr("Configured"), QColor(0x8c, 0x56, 0x4b)},
                                                  {tr("Recommended"), QColor(0x2c, 0xa0, 0x2c)}};
  for (const auto& [name, color] : markSpecs) {
    auto* mark = new QLineSeries;
    mark->setName(name);
    QPen pen(color);
    pen.setWidthF(name == tr("Recommended") ? 2.5 : 1.5);
    pen.setStyle(name == tr("Recommended") ? Qt::SolidLine : Qt::DashDotLine);
    mark->setPen(pen);
    chart()->addSeries(mark);
    mark->attachAxis(d.x);
    mark->attachAxis(d.y);
    d.marks.emplace_back(mark, 0.0);
  }

  tooltipOnHover(d.simulated, [this](qsizetype i) {
    const planner::IntervalPoint& p = impl_->simulatedPoints[static_cast<std::size_t>(i)];
    return tr("every %1 min (%2)\nsimulated ETTR %3 % ± %4\nanalytic (Daly) %5 %")
        .arg(p.effectiveMinutes, 0, 'f', 1)
        .arg(QString::fromStdString(p.label))
        .arg(100.0 * p.ettr.mean, 0, 'f', 2)
        .arg(100.0 * p.ettr.ci95, 0, 'f', 2)
        .arg(100.0 * p.analyticEttr, 0, 'f', 2);
  });
  tooltipOnHover(d.analytic, [this](qsizetype i) {
    const planner::IntervalPoint& p = impl_->analyticPoints[static_cast<std::size_t>(i)];
    return tr("every %1 min: analytic ETTR %2 %")
        .arg(p.effectiveMinutes, 0, 'f', 1)
        .arg(100.0 * p.analyticEttr, 0, 'f', 2);
  });
  for (auto& [mark, minutes] : d.marks) {
    tooltipOnHover(mark, [mark = mark, &minutes = minutes](qsizetype) {
      return QStringLiteral("%1: %2 min").arg(mark->name()).arg(minutes, 0, 'f', 1);
    });
  }
}

EttrChart::~EttrChart() = default;

void EttrChart::clear() {
  setSection(planner::CheckpointSection{});
}

void EttrChart::setSection(const planner::CheckpointSection& section) {
  Impl& d = *impl_;
  d.simulatedPoints.clear();
  d.analyticPoints.clear();
  for (const planner::IntervalPoint& p : section.curve) {
    if (p.effectiveMinutes <= 0.0) {
      continue;
    }
    d.analyticPoints.push_back(p);
    if (section.simulated && p.ettr.mean > 0.0) {
      d.simulatedPoints.push_back(p);
    }
  }
  QList<QPointF> sim, up, low, analytic;
  double lo = 1.0, hi = 60.0, bottom = 100.0, top = 0.0;
  for (const planner::IntervalPoint& p : d.simulatedPoints) {
    sim.append(QPointF(p.effectiveMinutes, 100.0 * p.ettr.mean));
    up.append(QPointF(p.effectiveMinutes, 100.0 * (p.ettr.mean + p.ettr.ci95)));
    low.append(QPointF(p.effectiveMinutes, 100.0 * (p.ettr.mean - p.ettr.ci95)));
    bottom = std::min(bottom, 100.0 * (p.ettr.mean - p.ettr.ci95));
    top = std::max(top, 100.0 * (p.ettr.mean + p.ettr.ci95));
  }
  for (const planner::IntervalPoint& p : d.analyticPoints) {
    analytic.append(QPointF(p.effectiveMinutes, 100.0 * p.analyticEttr));
    bottom = std::min(bottom, 100.0 * p.analyticEttr);
    top = std::max(top, 100.0 * p.analyticEttr);
  }
  if (!d.analyticPoints.empty()) {
    lo = d.analyticPoints.front().effectiveMinutes;
    hi = d.analyticPoints.back().effectiveMinutes;
  }
  const double minutes[] = {section.youngMinutes, section.dalyMinutes,
                            section.configuredMinutes.value_or(0.0), section.recommendedMinutes};
  for (double m : minutes) {
    if (m > 0.0) {
      lo = std::min(lo, m);
      hi = std::max(hi, m);
    }
  }
  if (top <= bottom) {
    bottom = 0.0;
    top = 100.0;
  }
  const double pad = std::max(0.5, 0.05 * (top - bottom));
  bottom = std::max(0.0, bottom - pad);
  top = std::min(100.0, top + pad);
  d.simulated->replace(sim);
  d.upper->replace(up);
  d.lower->replace(low);
  d.analytic->replace(analytic);
  for (std::size_t i = 0; i < d.marks.size(); ++i) {
    auto& [mark, at] = d.marks[i];
    at = minutes[i];
    QList<QPointF> line;
    if (at > 0.0 && !d.analyticPoints.empty()) {
      line = {QPointF(at, bottom), QPointF(at, top)};
    }
    mark->replace(line);
  }
  d.x->setRange(lo / 1.3, hi * 1.3);
  d.y->setRange(bottom, top);
}

}  // namespace stretch::gui
