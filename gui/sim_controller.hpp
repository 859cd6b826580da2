#pragma once
// Runs the Simulate action (gui/simulation.hpp) on a worker thread and reports back through
// queued signals, so the window stays responsive: progress while it runs, then exactly one of
// finished / failed / cancelled.
//
// Threads: create, start, cancel and destroy the controller on the GUI thread; its signals are
// emitted on that thread. One simulation at a time: start() while running returns false.
// Destroying a running controller cancels the run and waits for the worker to stop.

#include <atomic>
#include <memory>

#include <QObject>
#include <QString>
#include <QThread>

#include "gui/simulation.hpp"

namespace stretch::gui {

class SimulationController : public QObject {
  Q_OBJECT

 public:
  explicit SimulationController(QObject* parent = nullptr);
  ~SimulationController() override;

  // Starts the run; false (and nothing happens) when one is already running.
  bool start(SimulationRequest request);
  // Asks the running simulation to stop; cancelled() follows. No effect when idle.
  void cancel();
  bool isRunning() const noexcept { return thread_ != nullptr; }
  // The last finished run's result (null before the first).
  std::shared_ptr<const SimulationResult> result() const { return result_; }

 Q_SIGNALS:
  // Overall fraction done in [0, 1] and the stage ("simulate", "scale", "checkpoint", ...).
  void progressed(double fraction, const QString& stage);
  void finished();
  void failed(const QString& message);
  void cancelled();

 private:
  void onWorkerDone(std::shared_ptr<const SimulationResult> result, const QString& error,
                    bool wasCancelled);

  QThread* thread_ = nullptr;  // owned; deleted once the worker has stopped
  std::shared_ptr<std::atomic<bool>> cancel_;
  std::shared_ptr<const SimulationResult> result_;
};

}  // namespace stretch::gui
