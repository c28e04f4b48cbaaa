// edgellm-quantize IN.gguf OUT.gguf TYPE [--pure] [--threads N] [--compare REF.gguf] [--imatrix FILE
// [--include-weights S | --exclude-weights S]...]: writes a copy of IN with its weights in the mix
// TYPE (llama.cpp names: Q4_K_M, Q8_0, IQ2_XXS, F16 ...), every metadata key kept and
// general.file_type set; with an importance matrix the quantizers weight each column by it and the
// file records it (quantize.imatrix.*), as llama-quantize does. Progress on stderr; the per-tensor
// type / error table on stdout.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include <edgellm/gguf/reader.hpp>
#include <edgellm/gguf/writer.hpp>
#include <edgellm/model/tensors.hpp>
#include <edgellm/quant/imatrix.hpp>
#include <edgellm/quant/mix.hpp>
#include <edgellm/quant/quantize_weighted.hpp>
#include <edgellm/quant/ref.hpp>
#include <edgellm/runtime/thread_pool.hpp>
#include <edgellm/runtime/timer.hpp>

#include "common.hpp"

namespace {

using namespace edgellm;

const char* kUsage =
    "usage: edgellm-quantize IN.gguf OUT.gguf TYPE [--pure] [--threads N] [--compare REF.gguf]\n"
    "                        [--imatrix FILE [--include-weights S | --exclude-weights S]...]\n"
    "  TYPE: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q2_K_S Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M\n"
    "        Q5_K_S Q5_K_M Q6_K (Q3_K/Q4_K/Q5_K = the _M mix) IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S IQ2_M\n"
    "        IQ3_XXS IQ3_XS IQ3_S IQ3_M IQ4_NL IQ4_XS TQ1_0 TQ2_0 (IQ1_*, IQ2_*, IQ3_XXS and Q2_K_S\n"
    "        need --imatrix)\n"
    "  --pure      every weight matrix in TYPE's base type (no higher-bit output / attn_v / ffn_down)\n"
    "  --threads N quantize rows on N threads\n"
    "  --compare R also measure R (e.g. llama.cpp's file of the same mix) against IN; fail when a\n"
    "              tensor of ours has another type or a larger RMSE than R's\n"
    "  --imatrix FILE  importance matrix (edgellm-imatrix / llama-imatrix, GGUF or legacy .dat):\n"
    "              the quantizers minimise the error weighted by each column's mean squared input\n"
    "  --include-weights S  use the matrix only for tensors whose name contains S (repeatable)\n"
    "  --exclude-weights S  use it for all tensors but those whose name contains S (repeatable)\n";

// Longest quantize.imatrix.* string llama-quantize stores (its override values hold 127 bytes).
constexpr size_t kMaxImatrixString = 127;

// The importance matrix as llama-quantize uses it: per tensor name, its per-column weights, after
// --include-weights / --exclude-weights.
struct ImatrixUse {
  std::string file;
  std::vector<std::string> datasets;
  int chunk_count = 0;
  std::unordered_map<std::string, std::vector<float>> weights;
};

ImatrixUse load_imatrix_use(const std::string& path, const std::vector<std::string>& include,
                            const std::vector<std::string>& exclude) {
  ImatrixUse u;
  const Imatrix m = load_imatrix(path);
  if (m.format == ImatrixFormat::Gguf && !m.has_metadata)
    throw_error("imatrix file ", path, ": missing imatrix metadata (", kImatrixKeyDatasets, ", ", kImatrixKeyChunkCount,
                ", ", kImatrixKeyChunkSize, ")");
  u.file = path;
  u.datasets = m.datasets;
  u.chunk_count = m.chunk_count;
  u.weights = m.all_weights();
  for (const auto& name : exclude)
    for (auto it = u.weights.begin(); it != u.weights.end();)
      it = it->first.find(name) != std::string::npos ? u.weights.erase(it) : std::next(it);
  if (!include.empty()) {
    std::unordered_map<std::string, std::vector<float>> kept;
    for (const auto& name : include)
      for (auto& e : u.weights)
        if (e.first.find(name) != std::string::npos) kept.emplace(e.first, e.second);
    u.weights = std::move(kept);
  }
  for (const auto& e : u.weights)
    for (float v : e.second)
      if (!std::isfinite(v)) throw_error("imatrix file ", path, ": entry '", e.first, "' holds a non-finite value ", v);
  std::fprintf(stderr, "imatrix %s: %zu entries used of %zu, computed on %d chunks\n", path.c_str(), u.weights.size(),
               m.entries.size(), m.chunk_count);
  return u;
}

struct TensorReport {
  DType from = DType::F32, to = DType::F32;
  bool converted = false;
  bool measured = true;           // false: no dequantizer for `to`, no error figures
  double sq_err = 0, sq_ref = 0;  // sums over the tensor's elements
  double ref_rmse = -1;           // --compare: RMSE of R's tensor, -1 when not compared
  DType ref_type = DType::F32;
  bool ref_seen = false;          // --compare: R has the tensor
};

MixModelInfo model_info(const GgufFile& f) {
  MixModelInfo info;
  info.arch = f.get_string_or("general.architecture", "llama");
  const std::string p = info.arch + ".";
  info.n_layer = static_cast<int>(f.get_int_or(p + "block_count", 0));
  info.n_head = static_cast<int>(f.get_int_or(p + "attention.head_count", 1));
  info.n_head_kv = static_cast<int>(f.get_int_or(p + "attention.head_count_kv", info.n_head));
  if (info.n_head_kv <= 0) info.n_head_kv = info.n_head;
  info.n_expert = static_cast<int>(f.get_int_or(p + "expert_count", 0));
  const ArchSpec* arch = find_arch_spec(info.arch);
  info.has_output = f.find_tensor(arch ? arch->tensors.output : "output.weight") != nullptr;
  return info;
}

// Source rows as F32 (dequantized when the file holds another type).
void source_row(const GgufTensorInfo& t, int64_t row, float* out) {
  const size_t rb = dtype_row_bytes(t.type, t.ne[0]);
  dequantize_row(t.type, t.data + static_cast<size_t>(row) * rb, out, t.ne[0]);
}

// Converts tensor t to `to` into out, rows split over the pool (imatrix: ne0 importances per
// matrix of a 3-D tensor, or nullptr); adds squared errors to rep when `to` can be read back.
void convert_tensor(ThreadPool& pool, const GgufTensorInfo& t, DType to, const float* imatrix, std::vector<uint8_t>& out,
                    TensorReport& rep) {
  const int64_t nx = t.ne[0], rows = t.n_elements() / std::max<int64_t>(nx, 1);
  const int64_t rows_per_matrix = std::max<int64_t>(t.ne[1], 1);
  const size_t orb = dtype_row_bytes(to, nx);
  const bool measure = can_dequantize(to);
  out.assign(orb * static_cast<size_t>(rows), 0);
  const int nt = pool.n_threads();
  std::vector<double> err(static_cast<size_t>(nt), 0.0), ref(static_cast<size_t>(nt), 0.0);
  pool.parallel_for(rows, [&](int64_t b, int64_t e, int th) {
    std::vector<float> x(static_cast<size_t>(nx)), y(static_cast<size_t>(nx));  // [nx] source row, round trip
    double se = 0, sr = 0;
    for (int64_t r = b; r < e; ++r) {
      source_row(t, r, x.data());
      uint8_t* dst = out.data() + static_cast<size_t>(r) * orb;
      quantize_chunk(to, x.data(), dst, 1, nx, imatrix ? imatrix + (r / rows_per_matrix) * nx : nullptr);
      if (!measure) continue;
      dequantize_row(to, dst, y.data(), nx);
      for (int64_t i = 0; i < nx; ++i) {
        const double d = double(y[size_t(i)]) - double(x[size_t(i)]);
        se += d * d;
        sr += double(x[size_t(i)]) * double(x[size_t(i)]);
      }
    }
    err[size_t(th)] += se;
    ref[size_t(th)] += sr;
  });
  rep.measured = measure;
  for (int i = 0; i < nt; ++i) {
    rep.sq_err += err[size_t(i)];
    rep.sq_ref += ref[size_t(i)];
  }
}

// RMSE of another file's tensor `r` against the source tensor t (both dequantized).
double reference_rmse(ThreadPool& pool, const GgufTensorInfo& t, const GgufTensorInfo& r) {
  EDGELLM_CHECK(r.n_elements() == t.n_elements() && r.ne[0] == t.ne[0], "--compare: tensor '", t.name, "' has shape [",
                r.ne[0], ", ", r.ne[1], "] in the reference, expected [", t.ne[0], ", ", t.ne[1], "]");
  const int64_t nx = t.ne[0], rows = t.n_elements() / nx;
  std::vector<double> err(static_cast<size_t>(pool.n_threads()), 0.0);
  pool.parallel_for(rows, [&](int64_t b, int64_t e, int th) {
    std::vector<float> x(static_cast<size_t>(nx)), y(static_cast<size_t>(nx));
    for (int64_t row = b; row < e; ++row) {
      source_row(t, row, x.data());
      source_row(r, row, y.data());
      for (int64_t i = 0; i < nx; ++i) {
        const double d = double(y[size_t(i)]) - double(x[size_t(i)]);
        err[size_t(th)] += d * d;
      }
    }
  });
  double s = 0;
  for (double v : err) s += v;
  return std::sqrt(s / double(t.n_elements()));
}

// A bar redrawn in place on a terminal; in a log (not a tty) only every 10% as a plain line.
void progress(size_t done, size_t total, const std::string& name) {
  constexpr int kWidth = 30;
  if (!isatty(fileno(stderr))) {
    const size_t step = std::max<size_t>(1, total / 10);
    if (done % step == 0 || done == total) std::fprintf(stderr, "quantize: %zu/%zu %s\n", done, total, name.c_str());
    return;
  }
  const int fill = total ? static_cast<int>(kWidth * done / total) : kWidth;
  std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu %-40.40s", fill, "##############################", kWidth - fill, "", done, total,
               name.c_str());
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

std::string shape_str(const GgufTensorInfo& t) {
  std::string s;
  for (uint32_t d = 0; d < std::max<uint32_t>(t.n_dims, 1); ++d) s += (d ? "x" : "") + std::to_string(t.ne[d]);
  return s;
}

// The summary table (markdown) and the size line; returns the number of tensors worse than --compare's.
int print_summary(const std::vector<const GgufTensorInfo*>& tensors, const std::vector<TensorReport>& rep, bool compared, size_t out_bytes) {
  std::printf("| # | tensor | shape | from | to | RMSE | RMSE / RMS |%s\n", compared ? " ref type | ref RMSE | ours / ref |" : "");
  std::printf("|---:|---|---|---|---|---:|---:|%s\n", compared ? "---|---:|---:|" : "");
  int worse = 0;
  size_t in_bytes = 0;
  int64_t n_weights = 0;
  for (size_t i = 0; i < rep.size(); ++i) {
    const auto& t = *tensors[i];
    const auto& r = rep[i];
    in_bytes += t.nbytes;
    n_weights += t.n_elements();
    const double n = double(t.n_elements());
    const double rmse = std::sqrt(r.sq_err / n), rel = r.sq_ref > 0 ? std::sqrt(r.sq_err / r.sq_ref) : 0.0;
    std::printf("| %zu | %s | %s | %s | %s |", i, t.name.c_str(), shape_str(t).c_str(), dtype_name(r.from), dtype_name(r.to));
    if (r.measured) std::printf(" %.6g | %.4g |", rmse, rel);
    else std::printf(" - | - |");  // no dequantizer for the type here
    if (compared && r.ref_rmse >= 0 && r.measured) {
      const bool bad = r.ref_type != r.to || rmse > r.ref_rmse * (1 + 1e-9) + 1e-12;
      worse += bad ? 1 : 0;
      std::printf(" %s | %.6g | %s |", dtype_name(r.ref_type), r.ref_rmse,
                  r.ref_rmse > 0 ? (std::to_string(rmse / r.ref_rmse) + (bad ? " WORSE" : "")).c_str() : (bad ? "WORSE" : "-"));
    } else if (compared && r.ref_seen) {
      const bool bad = r.ref_type != r.to;  // types only: one of the two cannot be read back here
      worse += bad ? 1 : 0;
      std::printf(" %s | - | %s |", dtype_name(r.ref_type), bad ? "WORSE" : "-");
    } else if (compared) {
      std::printf(" - | - | - |");
    }
    std::printf("\n");
  }
  std::printf("\nsize: %.2f MiB -> %.2f MiB (%.3f bits per weight)\n", in_bytes / 1048576.0, out_bytes / 1048576.0,
              n_weights ? 8.0 * double(out_bytes) / double(n_weights) : 0.0);
  return worse;
}

// The importance of each column of tensor t as llama-quantize picks it (nullptr: none). Throws when
// the matrix has an entry of another size (except for token_embd, which llama.cpp lets pass).
const float* tensor_imatrix(const ImatrixUse& im, const GgufTensorInfo& t) {
  auto it = im.weights.find(t.name);
  if (it == im.weights.end()) return nullptr;
  const size_t want = static_cast<size_t>(t.ne[0] * t.ne[2]);
  if (it->second.size() == want) return it->second.data();
  if (t.name == "token_embd.weight" || t.name == "per_layer_token_embd.weight") return nullptr;
  throw_error("imatrix file ", im.file, ": entry '", t.name, "' has ", it->second.size(), " values, the tensor needs ",
              want);
}

struct Options {
  bool pure = false;
  int threads = 0;
  std::string compare, imatrix_file;
  std::vector<std::string> include, exclude;
  std::string in, out, type;  // the positional IN.gguf OUT.gguf TYPE
};

// *early: "help" or "version" when one of them was asked for (the other flags are then not checked).
Options parse(int argc, char** argv, std::string* early) {
  Options o;
  tool::Args args(argc, argv);
  for (std::string f; args.next(f);) {
    if (f == "-h" || f == "--help") { *early = "help"; return o; }
    else if (f == "--version") { *early = "version"; return o; }
    else if (f == "--pure") o.pure = true;
    else if (f == "--threads" || f == "-t") o.threads = tool::threads_flag(args, f);
    else if (f == "--compare") o.compare = args.value(f);
    else if (f == "--imatrix") o.imatrix_file = args.value(f);
    else if (f == "--include-weights") o.include.push_back(args.value(f));
    else if (f == "--exclude-weights") o.exclude.push_back(args.value(f));
    else tool::unknown(f);
  }
  const auto& pos = args.positional();
  if (pos.size() != 3) edgellm::throw_error("expected IN.gguf OUT.gguf TYPE, got ", pos.size(), " arguments (see --help)");
  if (pos[0] == pos[1]) edgellm::throw_error("OUT.gguf must differ from IN.gguf");
  if (!o.include.empty() && !o.exclude.empty())
    edgellm::throw_error("--include-weights and --exclude-weights cannot be used together");
  if ((!o.include.empty() || !o.exclude.empty()) && o.imatrix_file.empty())
    edgellm::throw_error(o.include.empty() ? "--exclude-weights" : "--include-weights", " needs --imatrix");
  o.in = pos[0];
  o.out = pos[1];
  o.type = pos[2];
  return o;
}

// What is written: the tensors in output order, their types, and per tensor the report row and
// the importances the quantizer weights columns by (nullptr: none).
struct Plan {
  std::vector<const GgufTensorInfo*> order;  // [n_tensors] output order
  std::vector<DType> types;                  // [n_tensors]
  std::vector<TensorReport> rep;             // [n_tensors]
  std::vector<const float*> tensor_weights;  // [n_tensors] importances or nullptr
};

Plan plan_tensors(const GgufFile& src, const QuantMix& mix, const ImatrixUse& im, bool pure) {
  const bool have_imatrix = !im.weights.empty();
  Plan p;
  auto& order = p.order;
  // Written in llama-quantize's order, so its layer counters and the file come out the same.
  std::vector<std::string> names;
  for (const auto& t : src.tensors()) names.push_back(t.name);
  for (size_t i : llama_tensor_order(names)) order.push_back(&src.tensors()[i]);
  MixModelInfo info = model_info(src);
  // A family of the architecture table: categories from its rows; another: by name (mix_category).
  const ArchSpec* arch = find_arch_spec(info.arch);
  std::vector<MixTensor> tensors;
  std::vector<DType> current;
  for (const GgufTensorInfo* t : order) {
    tensors.push_back(mix_tensor(arch, t->name, static_cast<int>(t->n_dims), t->ne[0]));
    current.push_back(t->type);
  }
  info.has_imatrix = have_imatrix;
  int n_fallback = 0;
  p.types = plan_quant_mix(mix, info, tensors, current, pure, &n_fallback);
  const std::vector<DType>& plan = p.types;
  if (n_fallback)
    std::fprintf(stderr, "warning: %d tensors have rows that do not split into %s blocks; they use a type with "
                         "smaller blocks (iq4_nl / q4_0 / q5_0 / q5_1 / q8_0, or f16)\n", n_fallback, dtype_name(mix.base));

  p.rep.resize(plan.size());
  p.tensor_weights.assign(plan.size(), nullptr);
  auto& rep = p.rep;
  auto& tensor_weights = p.tensor_weights;
  int requant = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const auto& t = *order[i];
    const bool requires_imatrix = is_quantizable_tensor(t.name, int(t.n_dims)) && mix_requires_imatrix(mix, tensors[i], plan[i]);
    if (requires_imatrix && !have_imatrix)
      throw_error(mix.name, " needs an importance matrix (tensor '", t.name, "' would be ", dtype_name(plan[i]),
                  "): make one with edgellm-imatrix and pass it with --imatrix");
    rep[i].from = t.type;
    rep[i].to = plan[i];
    rep[i].converted = plan[i] != t.type;
    if (!rep[i].converted) continue;
    if (!can_dequantize(t.type))
      throw_error("tensor '", t.name, "' has type ", dtype_name(t.type), ", which cannot be converted");
    if (!can_quantize_chunk(plan[i])) throw_error("tensor '", t.name, "': no quantizer for type ", dtype_name(plan[i]));
    if (dtype_is_quantized(t.type)) ++requant;
    if (have_imatrix) tensor_weights[i] = tensor_imatrix(im, t);
    if (requires_imatrix && !tensor_weights[i])
      throw_error("imatrix file ", im.file, ": no entry for tensor '", t.name, "', which ", mix.name, " makes ",
                  dtype_name(plan[i]), " (a very low-bit type needs one)");
  }
  if (requant)
    std::fprintf(stderr, "warning: %d tensors are already quantized; re-quantizing them loses more accuracy than "
                         "quantizing from F32/F16/BF16\n", requant);
  return p;
}

// The metadata of src and the keys llama-quantize sets, then the tensor directory of plan.
// Returns the bytes of tensor data the file holds.
size_t write_directory(GgufWriter& w, const GgufFile& src, const QuantMix& mix, const ImatrixUse& im, const Plan& p) {
  const bool have_imatrix = !im.weights.empty();
  // llama.cpp sets these keys after copying the rest: an existing one moves to the end.
  std::vector<std::pair<std::string, std::string>> imatrix_strings;
  std::vector<std::pair<std::string, uint32_t>> imatrix_counts;
  if (have_imatrix) {
    imatrix_strings.emplace_back("quantize.imatrix.file", im.file.substr(0, kMaxImatrixString));
    if (!im.datasets.empty()) imatrix_strings.emplace_back("quantize.imatrix.dataset", im.datasets[0].substr(0, kMaxImatrixString));
    imatrix_counts.emplace_back("quantize.imatrix.entries_count", static_cast<uint32_t>(im.weights.size()));
    if (im.chunk_count > 0) imatrix_counts.emplace_back("quantize.imatrix.chunks_count", static_cast<uint32_t>(im.chunk_count));
  }
  auto set_later = [&](const std::string& k) {
    if (k == "general.file_type" || k == "general.quantization_version") return true;
    for (const auto& kv : imatrix_strings)
      if (kv.first == k) return true;
    for (const auto& kv : imatrix_counts)
      if (kv.first == k) return true;
    return false;
  };
  w.copy_metadata(src, set_later);
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", static_cast<uint32_t>(mix.file_type));
  for (const auto& kv : imatrix_strings) w.set_string(kv.first, kv.second);
  for (const auto& kv : imatrix_counts) w.set_u32(kv.first, kv.second);
  size_t out_bytes = 0;
  for (size_t i = 0; i < p.types.size(); ++i) {
    const auto& t = *p.order[i];
    w.add_tensor(t.name, p.types[i], t.shape());
    out_bytes += dtype_row_bytes(p.types[i], t.ne[0]) * static_cast<size_t>(t.shape().n_rows());
  }
  return out_bytes;
}

int quantize_main(int argc, char** argv) {
  std::string early;
  const Options o = parse(argc, argv, &early);
  if (early == "help") { std::fputs(kUsage, stdout); return 0; }
  if (early == "version") return tool::print_version("edgellm-quantize");
  const QuantMix& mix = quant_mix(o.type);
  const GgufFile src = GgufFile::open(o.in);
  std::unique_ptr<GgufFile> ref;
  if (!o.compare.empty()) ref = std::make_unique<GgufFile>(GgufFile::open(o.compare));
  ImatrixUse im;
  if (!o.imatrix_file.empty()) im = load_imatrix_use(o.imatrix_file, o.include, o.exclude);
  const bool have_imatrix = !im.weights.empty();
  Plan p = plan_tensors(src, mix, im, o.pure);
  const auto& order = p.order;
  const auto& plan = p.types;
  auto& rep = p.rep;
  GgufWriter w(src.alignment());
  const size_t out_bytes = write_directory(w, src, mix, im, p);

  ThreadPool pool(o.threads > 0 ? o.threads : default_thread_count());
  std::fprintf(stderr, "quantizing %s -> %s as %s (file type %d%s%s, %d threads)\n", o.in.c_str(), o.out.c_str(), mix.name,
               mix.file_type, o.pure ? ", pure" : "", have_imatrix ? ", importance matrix" : "", pool.n_threads());
  Timer clock;
  w.write(o.out, [&](size_t i, std::vector<uint8_t>& out) {
    const auto& t = *order[i];
    progress(i, plan.size(), t.name);
    if (rep[i].converted) {
      convert_tensor(pool, t, plan[i], p.tensor_weights[i], out, rep[i]);
    } else {
      out.assign(t.data, t.data + t.nbytes);
    }
    if (ref) {
      const GgufTensorInfo* r = ref->find_tensor(t.name);
      if (r) {
        rep[i].ref_seen = true;
        rep[i].ref_type = r->type;
        if (r->type == t.type && !rep[i].converted) rep[i].ref_rmse = 0.0;
        else if (can_dequantize(r->type)) rep[i].ref_rmse = reference_rmse(pool, t, *r);
      }
    }
    if (i + 1 == plan.size()) progress(plan.size(), plan.size(), "done");
  });
  std::fprintf(stderr, "wrote %s in %.2f s\n", o.out.c_str(), clock.seconds());
  const int worse = print_summary(order, rep, ref != nullptr, out_bytes);
  if (worse) throw_error(worse, " tensors differ in type from ", o.compare, " or have a larger RMSE");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tool::run([&] { return quantize_main(argc, argv); });
}
