// edgellm-quantize IN.gguf OUT.gguf TYPE [--pure] [--threads N] [--compare REF.gguf]: writes a copy
// of IN with its weights in the mix TYPE (llama.cpp names: Q4_K_M, Q8_0, F16 ...), every metadata key
// kept and general.file_type set. Progress on stderr; the per-tensor type / error table on stdout.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include <edgellm/gguf/reader.hpp>
#include <edgellm/gguf/writer.hpp>
#include <edgellm/quant/mix.hpp>
#include <edgellm/quant/ref.hpp>
#include <edgellm/runtime/thread_pool.hpp>
#include <edgellm/runtime/timer.hpp>

#include "common.hpp"

namespace {

using namespace edgellm;

const char* kUsage =
    "usage: edgellm-quantize IN.gguf OUT.gguf TYPE [--pure] [--threads N] [--compare REF.gguf]\n"
    "  TYPE: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q2_K_S Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M\n"
    "        Q5_K_S Q5_K_M Q6_K (Q3_K/Q4_K/Q5_K = the _M mix)\n"
    "  --pure      every weight matrix in TYPE's base type (no higher-bit output / attn_v / ffn_down)\n"
    "  --threads N quantize rows on N threads\n"
    "  --compare R also measure R (e.g. llama.cpp's file of the same mix) against IN; fail when a\n"
    "              tensor of ours has another type or a larger RMSE than R's\n";

struct TensorReport {
  DType from = DType::F32, to = DType::F32;
  bool converted = false;
  double sq_err = 0, sq_ref = 0;  // sums over the tensor's elements
  double ref_rmse = -1;           // --compare: RMSE of R's tensor, -1 when not compared
  DType ref_type = DType::F32;
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
  info.has_output = f.find_tensor("output.weight") != nullptr;
  return info;
}

// Source rows as F32 (dequantized when the file holds another type).
void source_row(const GgufTensorInfo& t, int64_t row, float* out) {
  const size_t rb = dtype_row_bytes(t.type, t.ne[0]);
  dequantize_row(t.type, t.data + static_cast<size_t>(row) * rb, out, t.ne[0]);
}

// Converts tensor t to `to` into out, rows split over the pool; adds squared errors to rep.
void convert_tensor(ThreadPool& pool, const GgufTensorInfo& t, DType to, std::vector<uint8_t>& out, TensorReport& rep) {
  const int64_t nx = t.ne[0], rows = t.n_elements() / std::max<int64_t>(nx, 1);
  const size_t orb = dtype_row_bytes(to, nx);
  out.assign(orb * static_cast<size_t>(rows), 0);
  const int nt = pool.n_threads();
  std::vector<double> err(static_cast<size_t>(nt), 0.0), ref(static_cast<size_t>(nt), 0.0);
  pool.parallel_for(rows, [&](int64_t b, int64_t e, int th) {
    std::vector<float> x(static_cast<size_t>(nx)), y(static_cast<size_t>(nx));  // [nx] source row, round trip
    double se = 0, sr = 0;
    for (int64_t r = b; r < e; ++r) {
      source_row(t, r, x.data());
      uint8_t* dst = out.data() + static_cast<size_t>(r) * orb;
      quantize_row(to, x.data(), dst, nx);
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
    std::printf("| %zu | %s | %s | %s | %s | %.6g | %.4g |", i, t.name.c_str(), shape_str(t).c_str(), dtype_name(r.from),
                dtype_name(r.to), rmse, rel);
    if (compared && r.ref_rmse >= 0) {
      const bool bad = r.ref_type != r.to || rmse > r.ref_rmse * (1 + 1e-9) + 1e-12;
      worse += bad ? 1 : 0;
      std::printf(" %s | %.6g | %s |", dtype_name(r.ref_type), r.ref_rmse,
                  r.ref_rmse > 0 ? (std::to_string(rmse / r.ref_rmse) + (bad ? " WORSE" : "")).c_str() : (bad ? "WORSE" : "-"));
    } else if (compared) {
      std::printf(" - | - | - |");
    }
    std::printf("\n");
  }
  std::printf("\nsize: %.2f MiB -> %.2f MiB (%.3f bits per weight)\n", in_bytes / 1048576.0, out_bytes / 1048576.0,
              n_weights ? 8.0 * double(out_bytes) / double(n_weights) : 0.0);
  return worse;
}

}  // namespace

int main(int argc, char** argv) {
  return tool::run([&] {
    tool::Args args(argc, argv);
    bool pure = false;
    int threads = 0;
    std::string compare;
    for (std::string f; args.next(f);) {
      if (f == "-h" || f == "--help") { std::fputs(kUsage, stdout); return 0; }
      else if (f == "--version") return tool::print_version("edgellm-quantize");
      else if (f == "--pure") pure = true;
      else if (f == "--threads" || f == "-t") threads = tool::threads_flag(args, f);
      else if (f == "--compare") compare = args.value(f);
      else tool::unknown(f);
    }
    const auto& pos = args.positional();
    if (pos.size() != 3) edgellm::throw_error("expected IN.gguf OUT.gguf TYPE, got ", pos.size(), " arguments (see --help)");
    if (pos[0] == pos[1]) edgellm::throw_error("OUT.gguf must differ from IN.gguf");
    const QuantMix& mix = quant_mix(pos[2]);
    const GgufFile src = GgufFile::open(pos[0]);
    std::unique_ptr<GgufFile> ref;
    if (!compare.empty()) ref = std::make_unique<GgufFile>(GgufFile::open(compare));

    // Written in llama-quantize's order, so its layer counters and the file come out the same.
    std::vector<std::string> names;
    for (const auto& t : src.tensors()) names.push_back(t.name);
    std::vector<const GgufTensorInfo*> order;  // [n_tensors] output order
    for (size_t i : llama_tensor_order(names)) order.push_back(&src.tensors()[i]);
    std::vector<MixTensor> tensors;
    std::vector<DType> current;
    for (const GgufTensorInfo* t : order) {
      tensors.push_back({t->name, static_cast<int>(t->n_dims), t->ne[0]});
      current.push_back(t->type);
    }
    int n_fallback = 0;
    const std::vector<DType> plan = plan_quant_mix(mix, model_info(src), tensors, current, pure, &n_fallback);
    if (n_fallback)
      std::fprintf(stderr, "warning: %d tensors have rows that do not split into %s blocks; they use a type with "
                           "smaller blocks (q5_0 / q5_1 / q8_0, or f16)\n", n_fallback, dtype_name(mix.base));

    std::vector<TensorReport> rep(plan.size());
    int requant = 0;
    for (size_t i = 0; i < plan.size(); ++i) {
      const auto& t = *order[i];
      rep[i].from = t.type;
      rep[i].to = plan[i];
      rep[i].converted = plan[i] != t.type;
      if (!rep[i].converted) continue;
      if (!can_dequantize(t.type))
        throw_error("tensor '", t.name, "' has type ", dtype_name(t.type), ", which cannot be converted");
      if (!can_quantize(plan[i])) throw_error("tensor '", t.name, "': no quantizer for type ", dtype_name(plan[i]));
      if (dtype_is_quantized(t.type)) ++requant;
    }
    if (requant)
      std::fprintf(stderr, "warning: %d tensors are already quantized; re-quantizing them loses more accuracy than "
                           "quantizing from F32/F16/BF16\n", requant);

    GgufWriter w(src.alignment());
    // llama.cpp drops these two keys and appends them at the end.
    w.copy_metadata(src, [](const std::string& k) { return k == "general.file_type" || k == "general.quantization_version"; });
    w.set_u32("general.quantization_version", 2);
    w.set_u32("general.file_type", static_cast<uint32_t>(mix.file_type));
    size_t out_bytes = 0;
    for (size_t i = 0; i < plan.size(); ++i) {
      const auto& t = *order[i];
      w.add_tensor(t.name, plan[i], t.shape());
      out_bytes += dtype_row_bytes(plan[i], t.ne[0]) * static_cast<size_t>(t.shape().n_rows());
    }

    ThreadPool pool(threads > 0 ? threads : default_thread_count());
    std::fprintf(stderr, "quantizing %s -> %s as %s (file type %d%s, %d threads)\n", pos[0].c_str(), pos[1].c_str(), mix.name,
                 mix.file_type, pure ? ", pure" : "", pool.n_threads());
    Timer clock;
    w.write(pos[1], [&](size_t i, std::vector<uint8_t>& out) {
      const auto& t = *order[i];
      progress(i, plan.size(), t.name);
      if (rep[i].converted) {
        convert_tensor(pool, t, plan[i], out, rep[i]);
      } else {
        out.assign(t.data, t.data + t.nbytes);
      }
      if (ref) {
        const GgufTensorInfo* r = ref->find_tensor(t.name);
        if (r) {
          rep[i].ref_type = r->type;
          rep[i].ref_rmse = (r->type == t.type && !rep[i].converted) ? 0.0 : reference_rmse(pool, t, *r);
        }
      }
      if (i + 1 == plan.size()) progress(plan.size(), plan.size(), "done");
    });
    std::fprintf(stderr, "wrote %s in %.2f s\n", pos[1].c_str(), clock.seconds());
    const int worse = print_summary(order, rep, ref != nullptr, out_bytes);
    if (worse) throw_error(worse, " tensors differ in type from ", compare, " or have a larger RMSE");
    return 0;
  });
}
