// edgellm-bench's output: the md / csv / json / jsonl / sql rows (llama-bench's field names), the
// -v description of kernels and weights, and --plan's projection of a preset.
#pragma once
#include "bench_results.hpp"

namespace bench {

// "llama 1.1B Q4_K_M", as llama-bench's model_type.
std::string model_type(const LoadedModel& lm) {
  char buf[64];
  const double b = double(lm.n_params) / 1e9;
  if (b >= 1.0) std::snprintf(buf, sizeof buf, "%.1fB", b);
  else if (b >= 0.01) std::snprintf(buf, sizeof buf, "%.0fM", b * 1e3);
  else std::snprintf(buf, sizeof buf, "%.2fM", b * 1e3);
  return lm.model->file().get_string_or("general.architecture", "llama") + " " + buf + " " + lm.type_name;
}


std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string mib(uint64_t b) { return fmt("%.2f MiB", double(b) / (1024.0 * 1024.0)); }

std::string params_str(uint64_t n) { return n >= 100000000 ? fmt("%.2f B", double(n) / 1e9) : fmt("%.2f M", double(n) / 1e6); }

class Printer {
 public:
  Printer(const Options& o, const LoadedModel& lm, const std::string& cpu) : o_(o), lm_(lm), cpu_(cpu) {}

  void header() {
    if (o_.output == "md") {
      const bool st = lm_.model->weight_stream() != nullptr, sp = o_.speculative();
      std::printf("| model | size | params | backend | threads | test | t/s | t/s (main CPU) | GB/s | roofline "
                  "| ms/tok p50/p90/p99 | peak RSS (file/anon) | logits |%s%s%s\n",
                  sp ? " draft | drafted | accepted | acceptance | tok/pass |" : "", st || sp ? " s/tok |" : "",
                  st ? " read MiB/tok | limit s/tok |" : "");
      std::printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |%s%s%s\n",
                  sp ? " --- | ---: | ---: | ---: | ---: |" : "", st || sp ? " ---: |" : "", st ? " ---: | ---: |" : "");
    } else if (o_.output == "csv") {
      std::printf("%s\n", join(fields(), ",").c_str());
    } else if (o_.output == "json") {
      std::printf("[");
    } else if (o_.output == "sql") {  // llama-bench's: one table `test`, a row per test
      const std::vector<std::string> k = fields();
      std::string cols;
      for (size_t i = 0; i < k.size(); ++i) cols += std::string(i ? ", " : "") + k[i] + " " + sql_type(k[i]);
      std::printf("CREATE TABLE IF NOT EXISTS test (\n  %s\n);\n", cols.c_str());
    }
    std::fflush(stdout);
  }

  void row(const Result& r) {
    const bool gen_only = r.test.n_prompt == 0;
    const double p50 = edgellm::stats_percentile(r.token_ms, 50), p90 = edgellm::stats_percentile(r.token_ms, 90),
                 p99 = edgellm::stats_percentile(r.token_ms, 99);
    if (o_.output == "md") {
      std::printf("| %s | %s | %s | CPU | %d | %s | %.2f ± %.2f | %.2f | %s | %s | %s | %s (%s / %s) | %s |%s%s\n",
                  model_type(lm_).c_str(), mib(lm_.size_bytes).c_str(), params_str(lm_.n_params).c_str(), r.n_threads,
                  r.test.name().c_str(), r.avg_ts, r.stddev_ts, r.cpu_ts, gen_only ? fmt("%.1f", r.gbps).c_str() : "-",
                  gen_only && r.roofline > 0 ? fmt("%.0f %%", r.roofline).c_str() : "-",
                  r.token_ms.empty() ? "-" : (fmt("%.2f", p50) + " / " + fmt("%.2f", p90) + " / " + fmt("%.2f", p99)).c_str(),
                  mib(r.peak_rss).c_str(), mib(r.rss_file).c_str(), mib(r.rss_anon).c_str(),
                  edgellm::format_hash(r.hash).c_str(), speculative_cells(r).c_str(), stream_cells(r).c_str());
    } else {
      std::vector<std::string> samples_ns, samples_ts;
      for (double ns : r.samples_ns) {
        samples_ns.push_back(fmt("%.0f", ns));
        samples_ts.push_back(fmt("%.6g", double(r.test.n_prompt + r.test.n_gen) * 1e9 / ns));
      }
      const std::vector<std::string> base = {
          q(lm_.filename), q(model_type(lm_)), std::to_string(lm_.size_bytes), std::to_string(lm_.n_params),
          q(cpu_), q("CPU"), std::to_string(o_.n_batch), std::to_string(o_.n_batch), std::to_string(r.n_threads),
          q(o_.kv_type), q(o_.kv_type), o_.output == "sql" ? "1" : "true", std::to_string(r.test.n_prompt), std::to_string(r.test.n_gen),
          std::to_string(r.test.n_depth),
          fmt("%.0f", r.avg_ns), fmt("%.0f", r.stddev_ns), fmt("%.6f", r.avg_ts), fmt("%.6f", r.stddev_ts),
          list(samples_ns), list(samples_ts), fmt("%.3f", r.cpu_ts), fmt("%.3f", r.gbps), fmt("%.2f", r.roofline), fmt("%.4f", p50),
          fmt("%.4f", p90), fmt("%.4f", p99), std::to_string(r.peak_rss), std::to_string(r.rss_file),
          std::to_string(r.rss_anon), q(edgellm::format_hash(r.hash)),
          q(edgellm::isa_name(lm_.model->kernel_table().isa)), fmt("%.0f", r.read_per_tok), fmt("%.0f", r.stream_per_tok),
          fmt("%.6f", r.compute_s_tok), fmt("%.6f", r.limit_s_tok)};
      std::vector<std::string> v = base;
      if (o_.speculative()) {
        const double runs = double(r.samples_ns.size());
        const std::vector<std::string> sv = {
            q(r.speculative ? draft_name() : ""), std::to_string(r.n_passes), std::to_string(r.n_drafted),
            std::to_string(r.n_accepted), fmt("%.4f", r.acceptance()), fmt("%.4f", r.tokens_per_pass()),
            fmt("%.6f", r.avg_ts > 0 ? 1.0 / r.avg_ts : 0.0), fmt("%.0f", runs)};
        v.insert(v.end(), sv.begin(), sv.end());
      }
      if (o_.output == "csv") {
        std::printf("%s\n", join(v, ",").c_str());
      } else if (o_.output == "sql") {
        std::printf("INSERT INTO test (%s) VALUES (%s);\n", join(fields(), ", ").c_str(), join(v, ", ").c_str());
      } else if (o_.output == "jsonl") {  // one object per line, printed as each test ends
        const std::vector<std::string> k = fields();
        std::string line = "{";
        for (size_t i = 0; i < k.size(); ++i) line += (i ? ", \"" : "\"") + k[i] + "\": " + v[i];
        std::printf("%s}\n", line.c_str());
      } else {
        const std::vector<std::string> k = fields();
        std::printf("%s\n  {\n", n_rows_ ? "," : "");
        for (size_t i = 0; i < k.size(); ++i)
          std::printf("    \"%s\": %s%s\n", k[i].c_str(), v[i].c_str(), i + 1 < k.size() ? "," : "");
        std::printf("  }");
      }
    }
    ++n_rows_;
    std::fflush(stdout);
  }

  void footer() {
    if (o_.output == "json") std::printf("%s]\n", n_rows_ ? "\n" : "");
    std::fflush(stdout);
  }

 private:
  std::vector<std::string> fields() const {
    std::vector<std::string> k = {"model_filename", "model_type", "model_size", "model_n_params", "cpu_info", "backends", "n_batch",
            "n_ubatch", "n_threads", "type_k", "type_v", "use_mmap", "n_prompt", "n_gen", "n_depth", "avg_ns", "stddev_ns",
            "avg_ts", "stddev_ts", "samples_ns", "samples_ts", "cpu_ts", "gbps", "roofline_pct", "p50_ms", "p90_ms", "p99_ms",
            "peak_rss", "rss_file", "rss_anon", "logits_hash", "kernels", "read_bytes_per_token",
            "stream_bytes_per_token", "compute_s_per_token", "limit_s_per_token"};
    // Speculative decoding (-md, --lookup, --draft-layers): per row, summed over its n_runs timed runs.
    if (o_.speculative())
      for (const char* x : {"draft", "n_passes", "n_drafted", "n_accepted", "acceptance_rate", "tokens_per_pass",
                            "s_per_token", "n_runs"})
        k.push_back(x);
    return k;
  }
  // "lookup", "layers 2" or the draft model's file name.
  std::string draft_name() const {
    if (o_.spec.lookup) return "lookup";
    if (o_.draft.layers > 0) return "layers " + std::to_string(o_.draft.layers);
    const size_t slash = o_.draft.model.find_last_of('/');
    return o_.draft.model.substr(slash == std::string::npos ? 0 : slash + 1);
  }
  // A speculative row's cells (md): draft, tokens drafted and accepted per run, acceptance rate,
  // tokens per target pass, s/token ("-" but s/token on a -p row).
  std::string speculative_cells(const Result& r) const {
    if (!o_.speculative()) return "";
    const double s_tok = r.avg_ts > 0 ? 1.0 / r.avg_ts : 0, runs = double(std::max<size_t>(1, r.samples_ns.size()));
    if (!r.speculative) return fmt(" - | - | - | - | - | %.4g |", s_tok);
    return " " + draft_name() + fmt(" | %.1f", double(r.n_drafted) / runs) + fmt(" | %.1f", double(r.n_accepted) / runs) +
           fmt(" | %.1f %%", 100.0 * r.acceptance()) + fmt(" | %.2f", r.tokens_per_pass()) + fmt(" | %.4g |", s_tok);
  }
  // The streamed model's cells of a markdown row: s/token, storage MiB read per token, physical limit.
  std::string stream_cells(const Result& r) const {
    if (!lm_.model->weight_stream()) return "";
    const double s_tok = r.avg_ts > 0 ? 1.0 / r.avg_ts : 0;
    return (o_.speculative() ? std::string() : fmt(" %.3f |", s_tok)) + fmt(" %.1f |", r.read_per_tok / (1024.0 * 1024.0)) + fmt(" %.3f |", r.limit_s_tok);
  }
  // The SQL column type of a field (-o sql).
  static const char* sql_type(const std::string& k) {
    static const char* const kText[] = {"model_filename", "model_type", "cpu_info", "backends", "type_k", "type_v",
                                        "samples_ns", "samples_ts", "logits_hash", "kernels", "draft"};
    static const char* const kReal[] = {"avg_ts",  "stddev_ts", "cpu_ts",  "gbps", "roofline_pct", "p50_ms", "p90_ms", "p99_ms",
                                        "compute_s_per_token", "limit_s_per_token", "acceptance_rate", "tokens_per_pass",
                                        "s_per_token"};
    for (const char* t : kText)
      if (k == t) return "TEXT";
    for (const char* t : kReal)
      if (k == t) return "REAL";
    return "INTEGER";
  }
  // A string value: JSON-quoted, an SQL literal, or a CSV field.
  bool json() const { return o_.output == "json" || o_.output == "jsonl"; }
  std::string q(const std::string& s) const {
    if (json()) return edgellm::json_quote(s);
    if (o_.output == "sql") return sql_quote(s);
    return edgellm::csv_field(s);
  }
  static std::string sql_quote(const std::string& s) {
    std::string o = "'";
    for (char c : s) o += c == '\'' ? std::string("''") : std::string(1, c);
    return o + "'";
  }
  // An array value: [a, b] in JSON, "a,b" in CSV and 'a,b' in SQL (llama-bench's form).
  std::string list(const std::vector<std::string>& v) const {
    if (json()) return "[" + join(v, ", ") + "]";
    if (o_.output == "sql") return sql_quote(join(v, ","));
    return edgellm::csv_field(join(v, ","));
  }
  static std::string join(const std::vector<std::string>& v, const char* sep) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
    return s;
  }
  const Options& o_;
  const LoadedModel& lm_;
  std::string cpu_;
  int n_rows_ = 0;
};

std::string cpu_model() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return "";
  char line[512];
  std::string name;
  while (std::fgets(line, sizeof line, f)) {
    const std::string s = line;
    if (s.rfind("model name", 0) == 0 || s.rfind("Model", 0) == 0) {
      const size_t c = s.find(':');
      if (c != std::string::npos) name = s.substr(c + 2, s.size() - c - 3);
      break;
    }
  }
  std::fclose(f);
  return name;
}

void describe(const LoadedModel& lm) {
  std::fprintf(stderr, "%s", edgellm::describe_kernels(lm.model->kernel_table()).c_str());
  std::vector<std::pair<std::string, int>> counts;
  for (const auto& t : lm.model->file().tensors()) {
    const std::string n = edgellm::dtype_name(t.type);
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == n; });
    if (it == counts.end()) counts.emplace_back(n, 1);
    else ++it->second;
  }
  std::fprintf(stderr, "tensor types:");
  for (const auto& [n, c] : counts) std::fprintf(stderr, " %s x%d", n.c_str(), c);
  std::fprintf(stderr, "\n%s", lm.model->weights().describe_repack().c_str());
  std::fprintf(stderr, "%s", lm.model->weights().describe_residency().c_str());
  const edgellm::U8GemmKernel& g = lm.model->kernel_table().u8_gemm;
  if (g.tile) {
    std::fprintf(stderr, "prefill of matrices not repacked: %s, %dx%d register tile, for legacy and K-quant matrices with "
                         "rows of a multiple of 128; each 16-row tile is unpacked on the fly, per call",
                 g.name, g.rows, g.toks);
    if (g.group_rows)
      std::fprintf(stderr, "; K-quants%s in groups of %d interleaved rows, %dx%d tile", g.tile_s8 ? " and q8_0" : "",
                   g.group_rows, g.group_rows, g.toks);
    std::fprintf(stderr, "\n");
  }
  else
    std::fprintf(stderr, "prefill: tiled multi-row GEMV (no u8 GEMM in this kernel table)\n");
}

// The preset's tensor types under the mix, summed per type: what a projection needs (weights per
// token by type, bytes read per token) without building the model. Markdown on stdout.
void print_plan(const Options& o) {
  const edgellm::SyntheticSpec spec = edgellm::synthetic_preset(o.preset);
  const std::vector<edgellm::SyntheticTensor> ts = edgellm::synthetic_tensors(spec);
  const std::vector<edgellm::DType> types = edgellm::synthetic_mix_types(spec, edgellm::quant_mix(o.mix));
  struct Sum {
    std::string type;
    int tensors = 0;
    uint64_t weights = 0, bytes = 0, weights_per_token = 0;
  };
  std::vector<Sum> sums;
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::string n = edgellm::dtype_name(types[i]);
    auto it = std::find_if(sums.begin(), sums.end(), [&](const Sum& x) { return x.type == n; });
    if (it == sums.end()) it = sums.insert(sums.end(), Sum{n});
    const uint64_t w = uint64_t(ts[i].n_in) * uint64_t(ts[i].n_out);
    ++it->tensors;
    it->weights += w;
    it->bytes += edgellm::dtype_row_bytes(types[i], ts[i].n_in) * uint64_t(ts[i].n_out);
    // token_embd is read one row per token unless it doubles as the output matrix.
    if (ts[i].name != "token_embd.weight" || spec.tied) it->weights_per_token += w;
  }
  std::printf("| %s %s | tensors | weights | MiB | weights multiplied per token |\n| --- | ---: | ---: | ---: | ---: |\n",
              o.preset.c_str(), o.mix.c_str());
  Sum total{"total"};
  for (const Sum& x : sums) {
    std::printf("| %s | %d | %llu | %.1f | %llu |\n", x.type.c_str(), x.tensors, (unsigned long long)x.weights,
                double(x.bytes) / 1048576.0, (unsigned long long)x.weights_per_token);
    total.tensors += x.tensors;
    total.weights += x.weights;
    total.bytes += x.bytes;
    total.weights_per_token += x.weights_per_token;
  }
  std::printf("| **total** | %d | %llu | %.1f | %llu |\n", total.tensors, (unsigned long long)total.weights,
              double(total.bytes) / 1048576.0, (unsigned long long)total.weights_per_token);
  std::printf("\ntensor bytes %llu (%.3f GiB, %.3f bits per weight); synthetic importance matrix: %s\n",
              (unsigned long long)total.bytes, double(total.bytes) / 1073741824.0,
              8.0 * double(total.bytes) / double(total.weights),
              edgellm::synthetic_mix_uses_imatrix(spec, edgellm::quant_mix(o.mix), types) ? "yes" : "no");
}

}  // namespace bench
