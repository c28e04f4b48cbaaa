// edgellm::Error: the one exception type the library throws. Includes only the standard library.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace edgellm {

// Thrown for bad input (files, tensors, keys, parameters) and API misuse. The message names the
// file / tensor / key and the expected vs actual value. The library never exits or aborts.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <class... Args>
inline std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

// throw_error("file ", path, ": bad magic") — builds the message with operator<<.
template <class... Args>
[[noreturn]] inline void throw_error(Args&&... args) {
  throw Error(detail::concat(std::forward<Args>(args)...));
}

// Load-time check (always on): throws Error with the message when cond is false.
#define EDGELLM_CHECK(cond, ...)                         \
  do {                                                   \
    if (!(cond)) ::edgellm::throw_error(__VA_ARGS__);    \
  } while (0)

}  // namespace edgellm
