// Tests for core/json.hpp: strict parsing, numbers, strings/escapes, errors, writer round trips,
// and the speed of reading a big array of floats (the reference logits files).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include "edgellm/core/json.hpp"

#include "test_util.hpp"

using edgellm::Error;
using edgellm::Json;

namespace {
// A 10 MB document of float rows must parse well under a second (measured ~0.1 s on x86).

std::string error_of(const std::string& text) {
  try {
    Json::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("json: scalars and containers") {
  CHECK(Json::parse("null").is_null());
  CHECK(Json::parse(" true ").as_bool() == true);
  CHECK(Json::parse("false").as_bool() == false);
  const Json v = Json::parse(R"({"b": [1, 2.5, "x", null, {"k": {}}], "a": -3})");
  REQUIRE(v.is_object());
  CHECK(v.size() == 2);
  // Insertion order is kept.
  CHECK(v.as_object()[0].first == "b");
  CHECK(v.as_object()[1].first == "a");
  CHECK(v["a"].as_int() == -3);
  CHECK(v["b"].size() == 5);
  CHECK(v["b"].at(1).as_number() == 2.5);
  CHECK(v["b"].at(2).as_string() == "x");
  CHECK(v["b"].at(3).is_null());
  CHECK(v["b"].at(4)["k"].size() == 0);
  CHECK(v.contains("a"));
  CHECK_FALSE(v.contains("zz"));
  CHECK(v.find("zz") == nullptr);
  CHECK(Json::parse("[]").size() == 0);
  CHECK(Json::parse("{}").size() == 0);
}

TEST_CASE("json: numbers") {
  CHECK(Json::parse("0").is_int());
  CHECK(Json::parse("-0").as_number() == 0.0);
  CHECK(std::signbit(Json::parse("-0").as_number()));
  CHECK(Json::parse("9223372036854775807").as_int() == INT64_MAX);
  CHECK(Json::parse("-9223372036854775808").as_int() == INT64_MIN);
  // Beyond int64: a double, no longer exact.
  const Json big = Json::parse("18446744073709551616");
  CHECK_FALSE(big.is_int());
  CHECK(big.as_number() == 18446744073709551616.0);
  CHECK(Json::parse("1e3").as_int() == 1000);
  CHECK(Json::parse("2.0").as_int() == 2);
  CHECK_THROWS_AS(Json::parse("1.5").as_int(), Error);
  // Exact against the C library for a spread of literals (fast and slow paths).
  const char* lits[] = {"0.1", "-6.22291", "8.40434", "3.141592653589793", "1e-7", "123456789012345678901234",
                        "2.2250738585072014e-308", "4.9e-324", "1.7976931348623157e308", "0.30000000000000004",
                        "1e22", "1e23", "9007199254740993", "0.000000000000000000000000000001", "1E+2", "-1.5e-10"};
  for (const char* s : lits) {
    INFO(s);
    CHECK(Json::parse(s).as_number() == std::strtod(s, nullptr));
  }
  CHECK(Json::parse("1e-400").as_number() == 0.0);
  CHECK_THROWS_AS(Json::parse("1e400"), Error);
}

TEST_CASE("json: strings and escapes") {
  CHECK(Json::parse(R"("a\"b\\c\/d\b\f\n\r\t")").as_string() == "a\"b\\c/d\b\f\n\r\t");
  CHECK(Json::parse(R"("\u0041\u00e9\u20ac")").as_string() == "A\xC3\xA9\xE2\x82\xAC");
  // Surrogate pair -> U+1F600 as 4-byte UTF-8.
  CHECK(Json::parse(R"("\ud83d\ude00")").as_string() == "\xF0\x9F\x98\x80");
  CHECK(Json::parse(R"("\u0000")").as_string() == std::string(1, '\0'));
  // Raw UTF-8 passes through.
  CHECK(Json::parse("\"<\xEF\xBD\x9C" "end\xE2\x96\x81of>\"").as_string() == "<\xEF\xBD\x9C" "end\xE2\x96\x81of>");
}

TEST_CASE("json: strict errors carry the byte offset") {
  CHECK(error_of("[1,]").find("at byte 3") != std::string::npos);
  CHECK(error_of("{\"a\":1,}").find("at byte 7") != std::string::npos);
  CHECK(error_of("[1 2]").find("at byte 3") != std::string::npos);
  CHECK(error_of("01").find("leading zero") != std::string::npos);
  CHECK(error_of("1.").find("digit") != std::string::npos);
  CHECK(error_of("-").find("digit") != std::string::npos);
  CHECK(error_of("\"abc").find("unterminated") != std::string::npos);
  CHECK(error_of("\"a\nb\"").find("control") != std::string::npos);
  CHECK(error_of(R"("\x")").find("invalid escape") != std::string::npos);
  CHECK(error_of(R"("\ud83d")").find("surrogate") != std::string::npos);
  CHECK(error_of(R"("\ude00")").find("surrogate") != std::string::npos);
  CHECK(error_of(R"("\ud83d\u0041")").find("surrogate") != std::string::npos);
  CHECK(error_of("\"\xC3\x28\"").find("UTF-8") != std::string::npos);
  CHECK(error_of("\"\xC0\xAF\"").find("UTF-8") != std::string::npos);  // overlong '/'
  CHECK(error_of("{\"a\":1,\"a\":2}").find("duplicate") != std::string::npos);
  CHECK(error_of("[1] x").find("trailing") != std::string::npos);
  CHECK(error_of("").find("expected a value") != std::string::npos);
  CHECK(error_of("nul").find("expected a value") != std::string::npos);
  CHECK(error_of("NaN") != "");
  CHECK(error_of("// c\n1") != "");
  CHECK(error_of("{a:1}").find("string key") != std::string::npos);
  // Depth limit: no stack overflow on hostile input.
  const std::string deep(100000, '[');
  CHECK(error_of(deep).find("depth") != std::string::npos);
  CHECK_NOTHROW(Json::parse("[[[1]]]", 3));
  CHECK_THROWS_AS(Json::parse("[[[[1]]]]", 3), Error);
}

namespace {
// {"k0": 0, "k1": 1, ...}: n members (keys of equal length from 1e6 up, so none is a prefix of
// another), with key `dup` repeated at the end when given.
std::string object_of(size_t n, long dup = -1) {
  std::string t = "{";
  for (size_t i = 0; i < n; ++i) t += (i ? ",\"" : "\"") + std::to_string(1000000 + i) + "\":" + std::to_string(i);
  if (dup >= 0) t += ",\"" + std::to_string(1000000 + dup) + "\":0";
  return t + "}";
}

// CPU time of the calling thread, in seconds.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}
}  // namespace

TEST_CASE("json: duplicate keys are found in small and large objects, in O(n log n)") {
  for (size_t n : {size_t(1), size_t(15), size_t(16), size_t(17), size_t(40), size_t(5000)}) {
    CAPTURE(n);
    CHECK(Json::parse(object_of(n)).size() == n);
    for (long d : {0L, long(n / 2), long(n) - 1}) {
      const std::string t = object_of(n, d);
      CHECK(error_of(t).find("duplicate key in object at byte " + std::to_string(t.rfind(",\"") + 1)) != std::string::npos);
    }
  }
  CHECK(error_of("{\"a\":{\"x\":1,\"x\":2}}").find("at byte 12") != std::string::npos);  // nested
  CHECK_NOTHROW(Json::parse("[{\"x\":1},{\"x\":2}]"));                                    // per object
  // Same members, same order as written.
  const Json big = Json::parse(object_of(100));
  CHECK(big.as_object()[0].first == "1000000");
  CHECK(big.as_object()[99].first == "1000099");
  CHECK(big["1000042"].as_int() == 42);
  // 80k keys (~1.3 MB): each key was compared with every earlier one (40k keys took 4.8 s). Timing
  // is reported; the check is on the growth: 8x the keys must cost far less than 64x.
  auto seconds = [](const std::string& t) {
    double best = 1e9;  // the least CPU time of this thread (not wall time: other processes do not count)
    for (int rep = 0; rep < 5; ++rep) {
      const double t0 = thread_cpu_seconds();
      const Json v = Json::parse(t);
      best = std::min(best, thread_cpu_seconds() - t0);
      REQUIRE(v.is_object());
    }
    return best;
  };
  const double t10 = seconds(object_of(10000)), t80 = seconds(object_of(80000));
  MESSAGE("an object of 80000 keys parsed in ", t80 * 1e3, " ms (10000 keys: ", t10 * 1e3, " ms)");
  CHECK(t80 < 32 * std::max(t10, 1e-4));
}

TEST_CASE("json: limits on members and values refuse a document as soon as it passes them") {
  edgellm::JsonLimits lim;
  lim.max_members = 100;
  CHECK_NOTHROW(Json::parse(object_of(100), lim));
  CHECK_THROWS_AS(Json::parse(object_of(101), lim), edgellm::JsonLimitError);
  // Found at the 101st key, however long the rest is (and before a syntax error after it).
  std::string t = object_of(101);
  t.insert(t.size() - 1, ",\"tail\":[1,2,");
  try {
    Json::parse(t, lim);
    FAIL("no limit error");
  } catch (const edgellm::JsonLimitError& e) {
    CHECK(std::string(e.what()).find("more than 100 members at byte " + std::to_string(object_of(100).size())) !=
          std::string::npos);
  }
  CHECK_NOTHROW(Json::parse("[" + std::string(150, '[') + std::string(150, ']') + "]", lim));  // arrays are not capped
  // Every value counts: the outer array, 1, [2,3], 2, 3, the object, null: 7.
  const std::string doc = "[1,[2,3],{\"a\":null}]";
  edgellm::JsonLimits vals;
  vals.max_values = 7;
  CHECK(Json::parse(doc, vals) == Json::parse(doc));
  vals.max_values = 6;
  CHECK_THROWS_WITH_AS(Json::parse(doc, vals), doctest::Contains("more than 6 values at byte 14"), edgellm::JsonLimitError);
  vals.max_depth = 1;
  vals.max_values = 100;
  CHECK_THROWS_WITH(Json::parse(doc, vals), doctest::Contains("depth"));
}

TEST_CASE("json: access errors name the key, index and types") {
  const Json v = Json::parse(R"({"x": 1, "y": "s"})");
  try {
    (void)v["nope"];
    FAIL("no throw");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(m.find("\"nope\"") != std::string::npos);
    CHECK(m.find("x, y") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(v["y"].as_number(), "json: expected number, got string", Error);
  CHECK_THROWS_AS(v.at(0), Error);
  CHECK_THROWS_AS(Json::parse("[1]").at(1), Error);
  CHECK_THROWS_AS(Json::parse("1").size(), Error);
}

TEST_CASE("json: writer escapes and round-trips") {
  Json o = Json::object();
  o.set("s", "q\"\\\n\t\x01 \xE2\x82\xAC");
  o.set("i", int64_t(-42));
  o.set("d", 0.1);
  o.set("f", 1e300);
  o.set("nan", std::nan(""));
  o.set("arr", Json(Json::ArrayT{Json(true), Json(), Json(3)}));
  o.set("i", 7);  // replaces, keeps position
  const std::string text = o.dump();
  CHECK(text == "{\"s\":\"q\\\"\\\\\\n\\t\\u0001 \xE2\x82\xAC\",\"i\":7,\"d\":0.1,\"f\":1e+300,"
                "\"nan\":null,\"arr\":[true,null,3]}");
  const Json back = Json::parse(text);
  CHECK(back["s"] == o["s"]);
  CHECK(back["d"].as_number() == 0.1);
  CHECK(back["i"].as_int() == 7);
  // Pretty printing parses back to the same value.
  CHECK(Json::parse(o.dump(2)) == back);
  // Invalid UTF-8 is replaced, so the output is always valid JSON.
  CHECK(edgellm::json_escape("a\xFF") == "\"a\\ufffd\"");
  // Doubles round-trip bit-exactly; floats use their own shortest form.
  for (double d : {0.1, 1.0 / 3.0, -6.22291, 5e-324, 1.7976931348623157e308, 123456789.0, 2.5e-7}) {
    CHECK(Json::parse(Json(d).dump()).as_number() == d);
  }
  CHECK(edgellm::json_format_float(8.40434f) == "8.40434");
  CHECK(edgellm::json_format_float(0.1f) == "0.1");
  CHECK(float(std::strtod(edgellm::json_format_float(1.0f / 3.0f).c_str(), nullptr)) == 1.0f / 3.0f);
}

TEST_CASE("json: copies are deep, moves leave null") {
  Json a = Json::parse(R"({"k": [1, 2, 3]})");
  Json b = a;
  b.as_object()[0].second.push_back(4);
  CHECK(a["k"].size() == 3);
  CHECK(b["k"].size() == 4);
  Json c = std::move(b);
  CHECK(b.is_null());
  CHECK(c["k"].size() == 4);
  c = c;  // self-assignment
  CHECK(c["k"].size() == 4);
}

TEST_CASE("json: JSONL") {
  const auto rows = Json::parse_lines("{\"q\": 1}\n\n  \r\n{\"q\": 2}\r\n[3]");
  REQUIRE(rows.size() == 3);
  CHECK(rows[1]["q"].as_int() == 2);
  try {
    Json::parse_lines("{}\n{\"a\" 1}\n");
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("line 2") != std::string::npos);
  }
}

TEST_CASE("json: 10 MB of float rows (speed is reported, not asserted: timing belongs in bench/)") {
  std::string text = "{\"logits\": [";
  unsigned x = 12345;
  int rows = 0;
  while (text.size() < 10u * 1000u * 1000u) {
    text += rows ? ",\n[" : "\n[";
    for (int i = 0; i < 512; ++i) {
      x = x * 1664525u + 1013904223u;
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.5f", i ? "," : "", (double(x >> 8) / double(1u << 24)) * 20.0 - 10.0);
      text += buf;
    }
    text += "]";
    ++rows;
  }
  text += "]}";
  const auto t0 = std::chrono::steady_clock::now();
  const Json v = Json::parse(text);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("parsed ", text.size() / 1e6, " MB (", rows, " rows of 512) in ", sec, " s");
  CHECK(v["logits"].size() == size_t(rows));
  CHECK(v["logits"].at(0).as_float_vector().size() == 512);
}

TEST_CASE("json: shared reference file") {
  const std::string path = std::string(EDGELLM_SHARED_DATA) + "/reference/stories260K.p1.json";
  std::ifstream f(path, std::ios::binary);
  if (!f) EDGELLM_SKIP(path, " not found");
  std::stringstream ss;
  ss << f.rdbuf();
  const Json v = Json::parse(ss.str());
  const int64_t n_vocab = v["n_vocab"].as_int();
  CHECK(n_vocab == 512);
  CHECK(v["prompt"].as_string() == "Once upon a time");
  CHECK(v["prompt_tokens"].at(0).as_int() == 1);
  const auto row0 = v["logits"].at(0).as_float_vector();
  REQUIRE(row0.size() == size_t(n_vocab));
  CHECK(row0[0] == -6.22291f);
  CHECK(row0[1] == 8.40434f);
}
