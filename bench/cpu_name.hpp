// The machine a benchmark ran on, from /proc/cpuinfo: "model name (family F)" on x86, "CPU part P"
// on arm64.
#pragma once
#include <fstream>
#include <string>

inline std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model, family, implementer;
  while (std::getline(f, line)) {
    auto value = [&line]() { return line.substr(line.find(':') + 2); };
    if (model.empty() && line.rfind("model name", 0) == 0) model = value();
    if (family.empty() && line.rfind("cpu family", 0) == 0) family = value();
    if (implementer.empty() && line.rfind("CPU part", 0) == 0) implementer = value();
  }
  if (model.empty()) return implementer.empty() ? "unknown CPU" : "CPU part " + implementer;
  return family.empty() ? model : model + " (family " + family + ")";
}
