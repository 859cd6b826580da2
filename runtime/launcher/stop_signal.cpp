#include "runtime/launcher/stop_signal.hpp"

#include <csignal>

namespace stretch::launcher {

namespace {

std::atomic<int> gStopSignal{0};

void onStopSignal(int sig) {
  gStopSignal.store(sig);
}

}  // namespace

const std::atomic<int>& installStopSignals(std::initializer_list<int> signals) {
  struct sigaction action {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  for (const int sig : signals)
    sigaction(sig, &action, nullptr);
  return gStopSignal;
}

}  // namespace stretch::launcher
