// Helpers shared by the test files: where the shared data is, file checks and reads.
#pragma once
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>

namespace edgellm_test {

// ../shared/data (absolute); tests skip cleanly when it is absent.
inline const std::string kData = EDGELLM_SHARED_DATA;

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

}  // namespace edgellm_test
