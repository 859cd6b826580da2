#pragma once
// Small helpers shared by the files that implement MainWindow (private to gui/):
// main_window.cpp (construction, building the tabs and menus), main_window_form.cpp (the
// document and the form), main_window_simulation.cpp (running the simulation, showing and
// exporting its results) and main_window_files.cpp (files, tabs, settings, shortcuts).

#include <filesystem>
#include <string_view>

#include <QString>

namespace stretch::gui::detail {

inline QString qs(std::string_view text) {
  return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
}

inline std::filesystem::path toPath(const QString& path) {
  return std::filesystem::path(path.toStdString());
}

}  // namespace stretch::gui::detail
