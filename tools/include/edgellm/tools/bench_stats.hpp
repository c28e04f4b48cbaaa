// Statistics and output helpers of edgellm-bench: mean / sample stddev / percentiles of timing
// samples, a short hash of a logits row (so a speed change that changes results shows), comma
// lists of flag values, and JSON / CSV escaping. Standard library only.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"

namespace edgellm {

inline double stats_mean(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

// Sample standard deviation (n - 1 in the denominator, as llama-bench); 0 for fewer than 2 values.
inline double stats_stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double m = stats_mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size() - 1));
}

// The p-th percentile (p in [0, 100]) with linear interpolation between the two nearest ranks
// (numpy's default): p50 of {1, 2, 3, 4} is 2.5. Empty input: 0.
inline double stats_percentile(std::vector<double> v, double p) {
  EDGELLM_CHECK(p >= 0.0 && p <= 100.0, "percentile: p must be in [0, 100], got ", p);
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * double(v.size() - 1);
  const size_t lo = size_t(std::floor(rank));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - double(lo));
}

// FNV-1a (32-bit) over n 4-byte values (little-endian byte order whatever the host's).
inline uint32_t fnv1a_words(const void* x, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, static_cast<const char*>(x) + 4 * i, 4);
    for (int b = 0; b < 4; ++b) {
      h ^= (bits >> (8 * b)) & 0xFFu;
      h *= 16777619u;
    }
  }
  return h;
}

// Over the bytes of the floats: equal logits give equal hashes, any bit change (even -0.0 vs 0.0)
// a different one.
inline uint32_t logits_hash(const float* x, size_t n) { return fnv1a_words(x, n); }

// Over token ids: equal hashes, the same tokens (edgellm-bench's speculative rows).
inline uint32_t tokens_hash(const int32_t* x, size_t n) { return fnv1a_words(x, n); }

// "#0123abcd", the form printed in bench rows.
inline std::string format_hash(uint32_t h) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%08x", h);
  return buf;
}

// Splits "512,1024" into its items; empty items are an error (names the flag).
inline std::vector<std::string> split_list(const std::string& s, const std::string& flag) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    const size_t c = s.find(',', pos);
    const std::string item = s.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
    if (item.empty()) throw_error("option ", flag, ": empty item in '", s, "'");
    out.push_back(item);
    if (c == std::string::npos) return out;
    pos = c + 1;
  }
}

// "1,2,4" -> {1, 2, 4}; every value an integer in [lo, hi] (lo >= 0). An item may also be a range
// in llama-bench's forms: "first-last" (step 1), "first-last+step", "first-last*mult" (first, then
// each value times mult while <= last; first must be > 0), so "128-512*2" -> {128, 256, 512} and
// "0-64+32" -> {0, 32, 64}. A list expands to at most kMaxListValues values.
inline constexpr size_t kMaxListValues = 4096;
inline std::vector<int> parse_int_list(const std::string& s, const std::string& flag, int lo, int hi) {
  std::vector<int> out;
  // One non-negative integer of item at [b, e): digits only, no sign or blanks.
  auto number = [&](const std::string& item, size_t b, size_t e) -> long long {
    if (b >= e || e - b > 12 || item.find_first_not_of("0123456789", b) < e)
      throw_error("option ", flag, ": '", item, "' is not an integer or a range first-last[+step|*mult]");
    return std::stoll(item.substr(b, e - b));
  };
  auto push = [&](long long v) {
    if (v < lo || v > hi) throw_error("option ", flag, ": ", v, " is outside [", lo, ", ", hi, "]");
    if (out.size() >= kMaxListValues) throw_error("option ", flag, ": '", s, "' gives more than ", kMaxListValues, " values");
    out.push_back(int(v));
  };
  for (const std::string& item : split_list(s, flag)) {
    const size_t dash = item.find('-');
    if (dash == std::string::npos) {
      push(number(item, 0, item.size()));
      continue;
    }
    const size_t op = item.find_first_of("+*", dash + 1);
    const long long first = number(item, 0, dash), last = number(item, dash + 1, op == std::string::npos ? item.size() : op);
    const char kind = op == std::string::npos ? '+' : item[op];
    const long long by = op == std::string::npos ? 1 : number(item, op + 1, item.size());
    if (first > last) throw_error("option ", flag, ": range '", item, "' runs backwards (", first, " > ", last, ")");
    if (kind == '+' && by < 1) throw_error("option ", flag, ": range '", item, "' needs a step >= 1");
    if (kind == '*' && (by < 2 || first < 1))
      throw_error("option ", flag, ": range '", item, "' needs a multiplier >= 2 and a first value >= 1");
    for (long long v = first; v <= last; v = kind == '+' ? v + by : v * by) push(v);
  }
  return out;
}

// A JSON string literal (with quotes) for s: escapes quotes, backslashes and control bytes.
inline std::string json_quote(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += char(c);
    }
  }
  return o + "\"";
}

// A CSV field: quoted (with doubled quotes) when it holds a comma, quote or line break.
inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) {
    if (c == '"') o += '"';
    o += c;
  }
  return o + "\"";
}

}  // namespace edgellm
