// The lake tests' scratch directories: <TempDir>/<prefix>_<pid>_<name>, emptied when asked
// for and all removed when the test program ends (a file registers ScratchDirs once,
// at static initialisation, as gtest wants environments added before RUN_ALL_TESTS).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace sluice::lake {

class ScratchDirs : public ::testing::Environment {
 public:
  explicit ScratchDirs(std::string prefix) : prefix_(std::move(prefix)) {}

  // An empty directory named `name`.
  static std::string Fresh(std::string_view prefix, std::string_view name) {
    std::string dir =
        (std::filesystem::path(::testing::TempDir()) / (Stem(prefix) + std::string(name)))
            .lexically_normal()
            .string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
  }

  void TearDown() override {
    const std::string stem = Stem(prefix_);
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(::testing::TempDir(), ec)) {
      if (e.path().filename().string().starts_with(stem)) std::filesystem::remove_all(e.path(), ec);
    }
  }

 private:
  static std::string Stem(std::string_view prefix) {
    return std::string(prefix) + "_" + std::to_string(::getpid()) + "_";
  }

  std::string prefix_;
};

}  // namespace sluice::lake
