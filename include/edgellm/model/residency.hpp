// The residency plan: under a memory budget, which matrices stay resident and which are streamed
// from storage on every forward pass (model/weight_stream.hpp), with the stream's ring and read
// buffers sized from the stream's own constants. A pure function of the matrices' sizes, their
// matmul units, KV and scratch: LlamaWeights plans its matrices with it; tests plan made-up ones.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/core/memory.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/matmul.hpp"
#include "edgellm/model/llama_config.hpp"
#include "edgellm/model/memory_plan.hpp"
#include "edgellm/model/tensors.hpp"
#include "edgellm/model/weight_stream.hpp"
#include "edgellm/runtime/file_reader.hpp"
#include "edgellm/runtime/memory_limit.hpp"

namespace edgellm {

// How a model is loaded: the one set of options of LlamaModel and LlamaModel::load. With the
// default options the memory budget is detected: a model that fits loads with every matrix
// resident (read in place from the mapping, or repacked); one that does not fit keeps as many
// matrix bytes resident as the budget leaves after what is reserved, KV and scratch, and streams
// the rest from storage on every forward pass (model/weight_stream.hpp). all_resident(): no
// budget, every matrix resident whatever its size.
struct LoadOptions {
  // Repack the matrices whose type the kernel table can interleave (kernels/api.hpp PackedFormat).
  bool repack = true;
  // Bytes the model may use: reserved_bytes + resident weights + KV at plan.n_ctx + scratch + the
  // stream's ring. 0: what this process may really use (runtime/memory_limit.hpp: the smaller of
  // MemAvailable and the cgroup limit, less a margin). UINT64_MAX: no budget.
  uint64_t mem_budget = 0;
  // Of that budget (given or detected), bytes the model must leave free: a speculative decoding
  // draft model, the app's own memory. Ignored without a budget.
  uint64_t reserved_bytes = 0;
  // The run the budget must hold (KV type and context, batch, threads, sequences); n_ctx 0 means
  // default_context() of the model.
  MemoryPlanParams plan = MemoryPlanParams{0};
  int stream_slots = kStreamSlots;
  // The kernel table the model multiplies with (null: kernels(), the best for this CPU). The model
  // keeps this pointer: the table must outlive it.
  const KernelTable* kernels = nullptr;
  // Called as the load goes with the fraction done (by bytes of weight matrices read or repacked),
  // increasing, 1 last; returning false stops the load: everything it allocated is released and
  // the load throws Error "load cancelled". Empty: none.
  std::function<bool(float)> progress;

  // No budget: every matrix resident (repacked where a form exists, unless repack is false), with
  // kernel table kt (null: kernels()).
  static LoadOptions all_resident(bool repack = true, const KernelTable* kt = nullptr) {
    LoadOptions o;
    o.repack = repack;
    o.kernels = kt;
    o.mem_budget = UINT64_MAX;
    return o;
  }
};

// LoadOptions::progress as the loader drives it: add() the bytes of each matrix done (fractions
// below 1 while work remains), finish() reports 1. Strictly increasing fractions only.
class LoadProgress {
 public:
  LoadProgress(const std::function<bool(float)>& cb, uint64_t total_bytes) : cb_(cb), total_(total_bytes) {}
  void add(uint64_t bytes) {
    done_ += bytes;
    // Below 1 until finish(): what follows the matrices (the stream's start) is part of the load.
    report(total_ ? std::min(0.99f, static_cast<float>(static_cast<double>(done_) / static_cast<double>(total_))) : 0.99f);
  }
  void finish() { report(1.0f); }

 private:
  void report(float f) {
    if (!cb_ || f <= last_) return;
    last_ = f;
    if (!cb_(f)) throw_error("load cancelled");
  }
  const std::function<bool(float)>& cb_;
  uint64_t total_ = 0, done_ = 0;
  float last_ = -1.0f;
};

// The context tools use when -c is 0: the training context, at most 4096.
inline int default_context(const LlamaConfig& c) { return std::max(1, std::min(c.n_ctx_train > 0 ? c.n_ctx_train : 4096, 4096)); }

// The resident form of matrix m: its interleaved form when repack is on and the table has one;
// with transcode off, not a resident-only (transcoded) form (plan_transcoding says when).
inline const PackedFormat* resident_format(const KernelTable& kt, const MatmulWeight& m, bool repack,
                                           bool transcode = true) {
  if (!repack) return nullptr;
  const PackedFormat& pf = kt.packed_of(m.type);
  if (pf.resident_only && !transcode) return nullptr;
  return pf.rows > 0 && pf.pack && pf.gemm && m.n_in % 32 == 0 ? &pf : nullptr;
}
// The form of matrix m when streamed: its resident form unless that is resident-only (a transcoded
// i-quant, larger than the file's: it would grow the bytes read per token and the ring).
inline const PackedFormat* stream_format(const KernelTable& kt, const MatmulWeight& m, bool repack) {
  const PackedFormat* pf = resident_format(kt, m, repack);
  return pf && !pf->resident_only ? pf : nullptr;
}

// What the planner needs of one matrix.
struct PlannedMatrix {
  int unit_key = -1;        // the stream unit of its matmul call (layer * kUnitsPerLayer + unit); -1: the output matrix
  int64_t n_out = 0;        // rows
  size_t row_bytes = 0;     // one row in the file
  int form_rows = 1;        // rows per group of its resident form (1: the file's rows)
  size_t form_group_bytes = 0;  // bytes of one such group
  // Bytes of rows [0, rows) in the resident form, kDefaultAlignment-rounded (resident_form_bytes).
  uint64_t bytes_of_rows(int64_t rows) const {
    const uint64_t raw = uint64_t((rows + form_rows - 1) / form_rows) * form_group_bytes;
    return (raw + kDefaultAlignment - 1) / kDefaultAlignment * kDefaultAlignment;
  }
  uint64_t bytes() const { return bytes_of_rows(n_out); }
  uint64_t file_bytes() const { return uint64_t(n_out) * row_bytes; }
  // Streamed, it keeps the file's rows (stream_format: its resident form is resident-only);
  // else the ring holds it in the resident form. The same sizes of its streamed form:
  bool streams_file_form = false;
  int stream_rows() const { return streams_file_form ? 1 : form_rows; }
  uint64_t stream_bytes_of_rows(int64_t rows) const {
    if (!streams_file_form) return bytes_of_rows(rows);
    const uint64_t raw = uint64_t(rows) * row_bytes;
    return (raw + kDefaultAlignment - 1) / kDefaultAlignment * kDefaultAlignment;
  }
  uint64_t stream_bytes() const { return stream_bytes_of_rows(n_out); }
};

inline PlannedMatrix planned_matrix(const MatmulWeight& m, const PackedFormat* pf, int unit_key) {
  PlannedMatrix p;
  p.unit_key = unit_key;
  p.n_out = m.n_out;
  p.row_bytes = m.row_bytes;
  p.form_rows = pf ? pf->rows : 1;
  p.form_group_bytes = pf ? pf->group_bytes(m.n_in) : m.row_bytes;
  p.streams_file_form = pf && pf->resident_only;
  return p;
}

// Which matrices stay resident under a budget and what is streamed (plan_residency).
struct ResidencyPlan {
  bool streaming = false;        // false: every matrix resident (mapped or repacked), as without a budget
  uint64_t budget = 0;           // bytes planned against
  bool budget_detected = false;  // budget came from detect_memory_limit()
  uint64_t reserved = 0;         // LoadOptions::reserved_bytes, left free (with a budget)
  uint64_t kv = 0, scratch = 0;  // reserved for KV at n_ctx and the pass's buffers
  uint64_t weights = 0;          // every matrix in its resident form (repacked size where packed)
  uint64_t resident = 0;         // matrix bytes held in memory (anonymous, pinned when allowed)
  uint64_t streamed = 0;         // bytes read from storage per forward pass
  uint64_t ring = 0;             // the stream's slots
  uint64_t staging = 0;          // its read buffers (kStreamReadBuffers of read_chunk bytes, plus alignment)
  size_t read_chunk = 0;
  uint64_t minimum = 0;          // smallest budget that runs (streaming): reserved + kv + scratch + ring + staging
  int n_slots = 0;
  size_t slot_bytes = 0;
  int64_t output_chunk_rows = 0;           // rows per unit of a streamed output matrix
  std::vector<char> resident_matrix;       // per planned matrix (LlamaWeights::matrices() order)
  int n_ctx = 0;
  // Seconds per token of storage reads alone at `read_bps` bytes/s.
  double read_s_per_token(double read_bps) const { return read_bps > 0 ? double(streamed) / read_bps : 0; }
};

// Keeps resident as many matrix bytes as the budget leaves after the reserved bytes, KV, scratch
// and the stream's ring: the output matrix first when it fits (a pass without logits then reads
// nothing for it), then the others largest first. Every matrix is read once per pass, so each
// resident byte saves one byte of reads per token whichever matrix holds it. `mats`: the matrices
// in stream order (a unit's matrices next to each other), the output matrix last. minimum is set
// whenever there is a budget. Throws Error naming the minimum budget when even the ring does not fit.
inline ResidencyPlan plan_residency(const std::vector<PlannedMatrix>& mats, uint64_t kv, uint64_t scratch, int n_ctx,
                                    const LoadOptions& opt) {
  EDGELLM_CHECK(!mats.empty() && mats.back().unit_key < 0, "plan_residency: the output matrix must come last");
  ResidencyPlan p;
  p.n_ctx = n_ctx;
  p.kv = kv;
  p.scratch = scratch;
  const size_t n = mats.size();
  std::vector<uint64_t> res(n), str(n);  // each matrix's bytes resident, and in the ring
  for (size_t i = 0; i < n; ++i) {
    res[i] = mats[i].bytes();
    str[i] = mats[i].stream_bytes();
    p.weights += res[i];
  }
  p.resident_matrix.assign(n, 1);
  p.resident = p.weights;
  if (opt.mem_budget == UINT64_MAX) return p;  // no budget
  p.budget = opt.mem_budget;
  if (p.budget == 0) {
    const MemoryLimit lim = detect_memory_limit();
    if (lim.budget == 0) return p;  // nothing known: as without a budget
    p.budget = lim.budget;
    p.budget_detected = true;
  }
  p.reserved = opt.reserved_bytes;

  // The streaming layout at its smallest. The slot holds the largest unit: a layer's matmul call,
  // or output rows chunked to that.
  const int n_slots = std::max(2, opt.stream_slots);
  const size_t out = n - 1;
  const PlannedMatrix& ow = mats[out];
  auto unit_bytes = [&](bool streamed_only) {
    uint64_t best = 0;
    for (size_t i = 0; i < out;) {
      uint64_t g = 0;
      size_t j = i;
      for (; j < out && mats[j].unit_key == mats[i].unit_key; ++j)
        if (!streamed_only || !p.resident_matrix[j]) g += str[j];
      best = std::max(best, g);
      i = j;
    }
    return best;
  };
  // Chunks start on whole groups of the output's form and of kStreamRowAlign rows.
  const int64_t align = std::lcm<int64_t>(kStreamRowAlign, ow.stream_rows());
  auto chunk_rows_for = [&](uint64_t slot) {
    const uint64_t per = std::max<uint64_t>(1, ow.stream_bytes_of_rows(align));
    return std::max<int64_t>(align, int64_t(slot / per) * align);
  };
  auto slot_for = [&](bool streamed_only) {
    uint64_t slot = unit_bytes(streamed_only);
    if (!streamed_only || !p.resident_matrix[out]) slot = std::max<uint64_t>(slot, ow.stream_bytes_of_rows(std::min<int64_t>(ow.n_out, align)));
    return slot;
  };
  // Reads of up to kStreamReadBytes, or of the largest matrix when smaller (at least one group of rows).
  size_t chunk = 0;
  for (const PlannedMatrix& m : mats)
    chunk = std::max({chunk, std::min(kStreamReadBytes, size_t(m.n_out) * m.row_bytes), size_t(m.stream_rows()) * m.row_bytes});
  const uint64_t staging = uint64_t(kStreamReadBuffers) * FileReader::staging_for(chunk);
  uint64_t slot = slot_for(false);
  p.minimum = p.reserved + p.kv + p.scratch + staging + uint64_t(n_slots) * slot;
  if (p.reserved < p.budget && p.kv + p.scratch + p.weights <= p.budget - p.reserved) return p;

  p.streaming = true;
  p.n_slots = n_slots;
  p.read_chunk = chunk;
  p.staging = staging;
  if (p.budget < p.minimum)
    throw_error("memory budget ", format_bytes(p.budget), p.budget_detected ? " (detected)" : "", " is below the minimum of ",
                format_bytes(p.minimum), " for this model at -c ", p.n_ctx, ": ",
                p.reserved ? "reserved " + format_bytes(p.reserved) + " + " : std::string(), "KV ", format_bytes(p.kv),
                " + scratch ", format_bytes(p.scratch), " + stream ring ", p.n_slots, " x ", format_bytes(slot),
                " + read buffers ", format_bytes(p.staging), " (give a larger budget, a smaller -c or --kv-type q8_0)");
  std::fill(p.resident_matrix.begin(), p.resident_matrix.end(), 0);
  std::vector<size_t> order(out);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return res[a] > res[b]; });
  order.insert(order.begin(), out);
  uint64_t left = p.budget - p.minimum;
  auto fill = [&] {
    for (size_t i : order)
      if (!p.resident_matrix[i] && res[i] <= left) {
        p.resident_matrix[i] = 1;
        left -= res[i];
      }
  };
  fill();
  // The ring shrinks to the largest streamed unit; what that frees goes to more resident matrices
  // (which only makes the streamed units smaller still).
  const uint64_t slot1 = slot_for(true);
  if (slot1 < slot) {
    left += uint64_t(p.n_slots) * (slot - slot1);
    slot = slot1;
    fill();
  }
  p.slot_bytes = size_t(slot);
  p.ring = uint64_t(p.n_slots) * slot;
  p.output_chunk_rows = p.resident_matrix[out] ? 0 : std::min<int64_t>(ow.n_out, chunk_rows_for(slot));
  p.resident = p.streamed = 0;
  for (size_t i = 0; i < n; ++i) {
    if (p.resident_matrix[i]) p.resident += res[i];
    else p.streamed += mats[i].file_bytes();
  }
  if (std::all_of(p.resident_matrix.begin(), p.resident_matrix.end(), [](char r) { return r != 0; })) {
    p.streaming = false;  // the ring's reservation was not needed after all
    p.ring = p.staging = 0;
  }
  return p;
}

// The plan of a model of config c: KV and scratch of opt.plan (n_ctx 0: default_context(c)).
inline ResidencyPlan plan_residency(const std::vector<PlannedMatrix>& mats, const LlamaConfig& c, const LoadOptions& opt) {
  MemoryPlanParams mp = opt.plan;
  if (mp.n_ctx <= 0) mp.n_ctx = default_context(c);
  return plan_residency(mats, kv_bytes_at_ctx(c, mp), scratch_bytes(c, mp), mp.n_ctx, opt);
}

// The plan with or without the transcoded forms. Those are larger than the file's, so they are
// taken only where every matrix then stays resident: a plan that streams keeps every matrix in a
// form no larger than the file's (the storage, not the decode, sets its speed, and the smaller
// forms leave more of the model resident). mats_of(transcode): the planned matrices, forms chosen
// by resident_format(..., transcode). *transcode: whether the plan returned uses them.
template <class MatsOf>
inline ResidencyPlan plan_transcoding(MatsOf mats_of, const LlamaConfig& c, const LoadOptions& opt, bool* transcode) {
  *transcode = true;
  const std::vector<PlannedMatrix> mats = mats_of(true);
  const bool any = std::any_of(mats.begin(), mats.end(), [](const PlannedMatrix& m) { return m.streams_file_form; });
  if (!any) return plan_residency(mats, c, opt);
  try {
    ResidencyPlan p = plan_residency(mats, c, opt);
    if (!p.streaming) return p;
  } catch (const Error&) {  // below the streaming minimum: the file's forms may still fit
  }
  *transcode = false;
  return plan_residency(mats_of(false), c, opt);
}

// ---- the loader's plan of a LLaMA shape at a quantization mix, without a file (DEPLOY.md) ----

// The matrices LlamaWeights::matrices() plans for a file of this shape (model_tensors: the
// architecture table's required rows) whose tensors have the types edgellm-quantize gives them
// under `mix` (mix_tensor_types), in the loader's order: per layer by matmul unit, the output
// matrix (token_embd when tied) last. Their resident forms are those of opt.kernels when
// opt.repack is on (null: the file's forms, on every machine the same).
inline std::vector<PlannedMatrix> planned_matrices(const LlamaConfig& c, const QuantMix& mix, const LoadOptions& opt,
                                                   bool transcode = true) {
  const std::vector<ModelTensor> mt = model_tensors(c);
  const std::vector<GgufTensorInfo> ts = detail::tensor_infos(mt);
  const std::vector<size_t> order = detail::tensor_file_order(ts);
  std::vector<GgufTensorInfo> ordered;
  for (size_t i : order) ordered.push_back(ts[i]);
  const std::vector<DType> ordered_types = mix_tensor_types(ordered, c, mix);
  std::vector<DType> types(ts.size());
  for (size_t k = 0; k < order.size(); ++k) types[order[k]] = ordered_types[k];
  auto planned = [&](size_t i, int key) {
    MatmulWeight m;
    m.type = types[i];
    m.n_in = mt[i].n_in;
    m.n_out = mt[i].n_out;
    m.row_bytes = dtype_row_bytes(m.type, m.n_in);
    return planned_matrix(m, opt.kernels ? resident_format(*opt.kernels, m, opt.repack, transcode) : nullptr, key);
  };
  std::vector<PlannedMatrix> v;
  std::vector<std::pair<int, size_t>> layer;  // (unit key, index in mt) of one layer's matrices
  auto flush = [&] {
    std::stable_sort(layer.begin(), layer.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [key, i] : layer) v.push_back(planned(i, key));
    layer.clear();
  };
  size_t output = mt.size();
  const GlobalRole out_role = c.tied_embeddings ? GlobalRole::TokenEmbd : GlobalRole::Output;
  for (size_t i = 0; i < mt.size(); ++i) {
    if (mt[i].role != TensorRole::Matrix) continue;
    if (mt[i].layer < 0) {
      if (mt[i].global == out_role) output = i;
      continue;
    }
    if (!layer.empty() && mt[layer.back().second].layer != mt[i].layer) flush();
    layer.emplace_back(mt[i].layer * kUnitsPerLayer + mt[i].unit, i);
  }
  flush();
  EDGELLM_CHECK(output < mt.size(), "planned_matrices: no output matrix in the table of '", c.arch, "'");
  v.push_back(planned(output, -1));
  return v;
}

// The plan LlamaModel makes under opt for a file of this shape quantized with `mix`
// (planned_matrices): DEPLOY.md's "when it does not fit" tables.
inline ResidencyPlan project_residency(const LlamaConfig& c, const QuantMix& mix, const LoadOptions& opt) {
  bool transcode = true;
  return plan_transcoding([&](bool t) { return planned_matrices(c, mix, opt, t); }, c, opt, &transcode);
}

// For -v: the plan in one or two lines. pinned: the resident matrices are mlock'ed; n_units: the
// stream's units; load_read_bps: the storage read rate seen while loading (0: not measured).
inline std::string describe_residency(const ResidencyPlan& p, bool pinned, size_t n_units, double load_read_bps, bool direct_io) {
  std::string s;
  if (!p.streaming) {
    if (p.budget)
      s = "memory budget " + format_bytes(p.budget) + (p.budget_detected ? " (detected)" : "") + ": the whole model fits (" +
          format_bytes(p.weights) + " weights + KV " + format_bytes(p.kv) + " at -c " + std::to_string(p.n_ctx) +
          " + scratch " + format_bytes(p.scratch) +
          (p.reserved ? ", " + format_bytes(p.reserved) + " reserved" : std::string()) + "), nothing streamed\n";
    return s;
  }
  char line[512];
  std::snprintf(line, sizeof line,
                "memory budget %s%s: weights %s resident (%s), %s streamed per pass from storage in %zu units; "
                "KV %s at -c %d, scratch %s, ring %d x %s%s%s; minimum budget %s\n",
                format_bytes(p.budget).c_str(), p.budget_detected ? " (detected)" : "", format_bytes(p.resident).c_str(),
                pinned ? "pinned" : "anonymous, not pinned", format_bytes(p.streamed).c_str(), n_units,
                format_bytes(p.kv).c_str(), p.n_ctx, format_bytes(p.scratch).c_str(), p.n_slots,
                format_bytes(p.slot_bytes).c_str(), p.reserved ? ", reserved " : "",
                p.reserved ? format_bytes(p.reserved).c_str() : "", format_bytes(p.minimum).c_str());
  s = line;
  if (load_read_bps > 0) {
    std::snprintf(line, sizeof line, "stream: reads measured at load %.0f MB/s%s -> at least %.2f s per token for the streamed part\n",
                  load_read_bps / 1e6, direct_io ? " (O_DIRECT)" : "", p.read_s_per_token(load_read_bps));
    s += line;
  }
  return s;
}

}  // namespace edgellm
