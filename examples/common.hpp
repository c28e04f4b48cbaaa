// Shared by the tools in examples/: argument parsing and the tool contract (result on stdout,
// logs on stderr, exit 0 on success, exit 1 with one "error: ..." line otherwise).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include <edgellm/core/error.hpp>

namespace tool {

// Minimal flag parser: flags with or without a value, checked numbers, unknown flags rejected.
class Args {
 public:
  Args(int argc, char** argv) : argv_(argv + 1, argv + argc) {}

  // Next flag (or "" at the end). Positional arguments are collected separately.
  bool next(std::string& flag) {
    while (i_ < argv_.size()) {
      const std::string a = argv_[i_++];
      if (a.size() > 1 && a[0] == '-' && !is_number(a)) {
        flag = a;
        return true;
      }
      positional_.push_back(a);
    }
    return false;
  }
  std::string value(const std::string& flag) {
    if (i_ >= argv_.size()) edgellm::throw_error("option ", flag, " needs a value");
    return argv_[i_++];
  }
  long long integer(const std::string& flag) {
    const std::string v = value(flag);
    char* end = nullptr;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end) edgellm::throw_error("option ", flag, ": '", v, "' is not an integer");
    return x;
  }
  double number(const std::string& flag) {
    const std::string v = value(flag);
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end) edgellm::throw_error("option ", flag, ": '", v, "' is not a number");
    return x;
  }
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  static bool is_number(const std::string& s) {
    char* end = nullptr;
    std::strtod(s.c_str(), &end);
    return end && *end == 0;
  }
  std::vector<std::string> argv_;
  size_t i_ = 0;
  std::vector<std::string> positional_;
};

// --mem-budget MIB: a positive number of MiB, as bytes.
inline uint64_t mem_budget_bytes(Args& args, const std::string& flag) {
  const double mib = args.number(flag);
  if (!(mib >= 1 && mib <= 1024.0 * 1024 * 1024))
    edgellm::throw_error("option ", flag, ": expected MiB in [1, 2^30], got ", mib);
  return static_cast<uint64_t>(mib * 1024 * 1024);
}

[[noreturn]] inline void unknown(const std::string& flag) { edgellm::throw_error("unknown option ", flag, " (see --help)"); }

// Runs a tool body with the contract: any exception -> "error: ..." on stderr, exit 1.
inline int run(const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "error: unknown exception\n");
    return 1;
  }
}

}  // namespace tool
