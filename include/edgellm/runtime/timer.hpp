// Monotonic wall-clock timing (std::chrono::steady_clock): Timer and now_ms(). Standard library only.
#pragma once
#include <chrono>

namespace edgellm {

// Milliseconds on a monotonic clock with an arbitrary epoch: only differences are meaningful.
inline double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// Time since construction or the last reset(); never goes backwards (system clock changes and
// NTP steps do not affect it).
class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  void reset() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  double ms() const { return seconds() * 1e3; }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace edgellm
