// Helpers shared by the test files: where the shared data is, file checks and reads.
#pragma once
#include <atomic>
#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace edgellm_test {

// ../shared/data (absolute); tests that need it report themselves skipped when it is absent.
inline const std::string kData = EDGELLM_SHARED_DATA;

// Skipped test cases: EDGELLM_SKIP ends a case that cannot run here (no shared data, no /proc) and
// counts it; main.cpp then exits with kSkipReturnCode when nothing failed, which ctest (one process
// per case, SKIP_RETURN_CODE) reports as "Skipped", not "Passed".
constexpr int kSkipReturnCode = 77;
inline std::atomic<int>& skipped_cases() {
  static std::atomic<int> n{0};
  return n;
}

inline bool path_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}
inline bool dir_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
// The whole file ("" when it cannot be read).
inline std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// n floats drawn uniformly from [lo, hi) with rng.
inline std::vector<float> uniform_floats(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& f : v) f = dist(rng);
  return v;
}

}  // namespace edgellm_test

// Part of a case could not run (counted, the case goes on); EDGELLM_SKIP also ends the case.
#define EDGELLM_SKIP_PART(...)          \
  do {                                  \
    MESSAGE("skipped: ", __VA_ARGS__);  \
    ++::edgellm_test::skipped_cases();  \
  } while (0)
#define EDGELLM_SKIP(...)          \
  do {                             \
    EDGELLM_SKIP_PART(__VA_ARGS__); \
    return;                        \
  } while (0)
// Ends the case as skipped unless the file or folder exists.
#define EDGELLM_SKIP_WITHOUT(path) \
  if (!::edgellm_test::path_exists(path)) EDGELLM_SKIP(path, " not found")
