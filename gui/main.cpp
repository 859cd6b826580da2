// stretch-planner: the Qt 6 desktop planner (gui/app.hpp has the command line).
#include "gui/app.hpp"

int main(int argc, char** argv) {
  return stretch::gui::runPlanner(argc, argv);
}
