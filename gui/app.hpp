#pragma once
// The stretch-planner command line (gui/main.cpp is only this call):
//
//   stretch-planner [FILE]                      open a job or a DeepSpeed config
//   stretch-planner --job FILE --screenshot OUT.png [--tab NAME] [--seeds N] [--size WxH]
//                   [--no-run]                  run the job's simulation (not with --no-run),
//                                               render the window showing tab NAME to a PNG
//                                               and exit
//   stretch-planner --help | --version
//
// Without FILE the window restores the last session's inputs (or the bundled example). The
// screenshot mode reads and writes no settings and works with QT_QPA_PLATFORM=offscreen (set
// automatically when there is no display). Exit status: 0, or 2 on bad input (an unreadable
// file, an unknown tab, an invalid scenario, a failed simulation).

namespace stretch::gui {

int runPlanner(int argc, char** argv);

}  // namespace stretch::gui
