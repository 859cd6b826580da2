#pragma once
// Shared by the GUI tests: where the fixtures are.

#include <QString>

namespace stretch::gui::test {

// The repository root: $STRETCH_SOURCE_DIR when set (CTest sets it), else the configure-time
// path.
inline QString sourceDir() {
  const QString env = qEnvironmentVariable("STRETCH_SOURCE_DIR");
  return env.isEmpty() ? QStringLiteral(STRETCH_SOURCE_DIR_DEFAULT) : env;
}

inline QString fixture(const QString& relative) {
  return sourceDir() + QStringLiteral("/fixtures/") + relative;
}

}  // namespace stretch::gui::test
