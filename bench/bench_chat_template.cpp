// Time to render a chat through a Jinja chat template: a 10-turn conversation (a system prompt, 9
// answered turns with thoughts, a 10th answered by a tool call and its result) with two tools: the
// work a server does per request before the prompt is tokenized.
//   bench_chat_template [TEMPLATE.jinja] [--vocab VOCAB.gguf] [--runs N]
// Default template: ../shared/data/templates/Qwen-Qwen3-0.6B.jinja. Prints the median and p90 of
// the parse, the render, the protected render (people's text marked), and with --vocab the
// protected render + tokenization, in microseconds; and the CPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <edgellm/core/json.hpp>
#include <edgellm/gguf/reader.hpp>
#include <edgellm/jinja/template.hpp>
#include <edgellm/text/chat.hpp>
#include <edgellm/text/tokenizer.hpp>
#include <edgellm/text/vocab.hpp>

namespace {

std::string read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "error: cannot open %s\n", path.c_str());
    std::exit(1);
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, family;
  while (std::getline(f, line)) {
    if (line.rfind("cpu family", 0) == 0 && family.empty()) family = line.substr(line.find(':') + 2);
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2) + (family.empty() ? "" : " (family " + family + ")");
  }
  return "unknown CPU";
}

edgellm::ChatRequest ten_turns() {
  edgellm::ChatRequest r;
  r.tools = edgellm::Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
       "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "set_alarm", "description": "Set an alarm on the device",
     "parameters": {"type": "object", "properties": {"time": {"type": "string", "description": "HH:MM, 24-hour"},
       "label": {"type": "string"}}, "required": ["time"]}}}])");
  r.messages.push_back({"system", "You are a helpful assistant on a phone. Answer briefly."});
  for (int i = 0; i < 9; ++i) {  // 9 answered turns, then the 10th with a tool call
    r.messages.push_back({"user", "Question " + std::to_string(i) + ": what should I wear tomorrow in Paris, and when should I leave?"});
    r.messages.push_back({"assistant", "<think>\nThe user asks about clothes and timing.\n</think>\n\nTake a light jacket; leave at 8:00."});
  }
  r.messages.push_back({"user", "Wake me at 7 and tell me the weather."});
  edgellm::ChatMessage call{"assistant", ""};
  call.extra = edgellm::Json::parse(
      R"({"tool_calls": [{"type": "function", "function": {"name": "set_alarm", "arguments": {"time": "07:00", "label": "wake"}}}]})");
  r.messages.push_back(call);
  edgellm::ChatMessage result{"tool", "{\"ok\": true}"};
  result.extra = edgellm::Json::parse(R"({"name": "set_alarm"})");
  r.messages.push_back(result);
  return r;
}

struct Stats {
  double median, p90;
};
Stats time_us(int runs, const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t[t.size() * 9 / 10]};
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = std::string(EDGELLM_SHARED_DATA_DIR) + "/templates/Qwen-Qwen3-0.6B.jinja", vocab;
  int runs = 2000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--vocab" && i + 1 < argc) vocab = argv[++i];
    else if (a == "--runs" && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else if (!a.empty() && a[0] != '-') path = a;
    else {
      std::fprintf(stderr, "usage: bench_chat_template [TEMPLATE.jinja] [--vocab VOCAB.gguf] [--runs N]\n");
      return 1;
    }
  }
  try {
    const std::string src = read(path);
    const edgellm::ChatRequest req = ten_turns();
    const edgellm::ChatTemplate tmpl = edgellm::ChatTemplate::jinja(src, "<|endoftext|>", "<|im_end|>");
    const std::string text = tmpl.apply(req);
    std::printf("template %s (%zu bytes), %zu messages + 2 tools -> %zu bytes of prompt; %s\n", path.c_str(), src.size(),
                req.messages.size(), text.size(), cpu_name().c_str());
    const Stats parse = time_us(std::max(1, runs / 10), [&] { edgellm::jinja::Template t(src); });
    const Stats render = time_us(runs, [&] { (void)tmpl.apply(req); });
    const std::vector<std::string> controls = {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>"};
    const Stats prot = time_us(runs, [&] { (void)tmpl.apply_protected(req, controls); });
    std::printf("parse            median %8.1f us  p90 %8.1f us\n", parse.median, parse.p90);
    std::printf("render           median %8.1f us  p90 %8.1f us\n", render.median, render.p90);
    std::printf("render, marked   median %8.1f us  p90 %8.1f us\n", prot.median, prot.p90);
    if (!vocab.empty()) {
      const edgellm::Tokenizer tok(edgellm::Vocab::from_gguf(edgellm::GgufFile::open(vocab)));
      const edgellm::ChatTemplate t2 = edgellm::ChatTemplate::jinja(src, tok);
      size_t n = 0;
      const Stats tk = time_us(std::max(1, runs / 10), [&] { n = t2.tokenize(req, tok).size(); });
      std::printf("render+tokenize  median %8.1f us  p90 %8.1f us  (%zu tokens)\n", tk.median, tk.p90, n);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
