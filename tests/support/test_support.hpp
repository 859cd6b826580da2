#pragma once
// Helpers shared by the test executables.

#include <filesystem>
#include <string>

namespace stretch::test {

// The repository root: $STRETCH_SOURCE_DIR when set (CTest sets it), else the configure-time path.
std::filesystem::path sourceDir();

// sourceDir() / "fixtures" / relative.
std::filesystem::path fixturePath(const std::string& relative);

// Whole file as a string; fails the current test (ADD_FAILURE) and returns "" when unreadable.
std::string readFile(const std::filesystem::path& path);

}  // namespace stretch::test
