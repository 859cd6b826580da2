#include "gui/sim_controller.hpp"

#include <chrono>
#include <exception>
#include <string>
#include <utility>

#include <QMetaObject>
#include <QPointer>

#include "runtime/common/error.hpp"

namespace stretch::gui {

SimulationController::SimulationController(QObject* parent) : QObject(parent) {}

SimulationController::~SimulationController() {
  if (thread_ != nullptr) {
    cancel_->store(true);
    thread_->wait();
    delete thread_;
  }
}

bool SimulationController::start(SimulationRequest request) {
  if (thread_ != nullptr) {
    return false;
  }
  cancel_ = std::make_shared<std::atomic<bool>>(false);
  QPointer<SimulationController> self(this);
  auto cancel = cancel_;
  thread_ = QThread::create([self, cancel, request = std::move(request)]() mutable {
    // Progress is throttled to ~25 updates a second: a 10,000-seed run posts no flood.
    using Clock = std::chrono::steady_clock;
    Clock::time_point last{};
    std::string lastStage;
    auto progress = [&](double fraction, const std::string& stage) {
      const auto now = Clock::now();
      if (stage == lastStage && now - last < std::chrono::milliseconds(40)) {
        return;
      }
      last = now;
      lastStage = stage;
      const QString stageText = QString::fromStdString(stage);
      QMetaObject::invokeMethod(
          self.data(),
          [self, fraction, stageText] {
            if (self) {
              Q_EMIT self->progressed(fraction, stageText);
            }
          },
          Qt::QueuedConnection);
    };
    std::shared_ptr<const SimulationResult> result;
    QString error;
    bool wasCancelled = false;
    try {
      result = std::make_shared<const SimulationResult>(runSimulation(request, *cancel, progress));
    } catch (const SimulationCancelled&) {
      wasCancelled = true;
    } catch (const std::exception& e) {
      error = QString::fromStdString(e.what());
    }
    QMetaObject::invokeMethod(
        self.data(),
        [self, result, error, wasCancelled] {
          if (self) {
            self->onWorkerDone(result, error, wasCancelled);
          }
        },
        Qt::QueuedConnection);
  });
  thread_->start();
  return true;
}

void SimulationController::cancel() {
  if (thread_ != nullptr) {
    cancel_->store(true);
  }
}

void SimulationController::onWorkerDone(std::shared_ptr<const SimulationResult> result,
                                        const QString& error, bool wasCancelled) {
  if (thread_ != nullptr) {
    thread_->wait();  // the lambda has returned: this only joins
    delete thread_;
    thread_ = nullptr;
  }
  if (wasCancelled || cancel_->load()) {
    Q_EMIT cancelled();
  } else if (!error.isEmpty()) {
    Q_EMIT failed(error);
  } else {
    result_ = std::move(result);
    Q_EMIT finished();
  }
}

}  // namespace stretch::gui
