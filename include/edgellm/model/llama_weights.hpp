// LlamaWeights: typed, zero-copy views of a LLaMA model's tensors in the mapped GGUF file, each
// checked for name, type and shape at load time (Error says expected vs actual). Norm vectors are
// kept as F32 copies (tiny); everything else is read in place, whatever its type — except matrices
// whose type the kernel table can repack (PackedFormat, kernels/api.hpp): with repack on, those are
// copied once into a row-interleaved form in anonymous memory and the file pages they came from
// are released, so resident memory does not double.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "edgellm/core/memory.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/core/tensor.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/matmul.hpp"
#include "edgellm/model/llama_config.hpp"
#include "edgellm/model/weight_stream.hpp"
#include "edgellm/quant/ref.hpp"
#include "edgellm/runtime/memory_limit.hpp"
#include "edgellm/model/memory_plan.hpp"
#include "edgellm/runtime/thread_pool.hpp"

namespace edgellm {

// How a model is loaded. With the default options a model that fits in memory loads as it always
// did (matrices read in place from the mapping, or repacked); one that does not fit keeps as many
// matrix bytes resident as mem_budget leaves after KV and scratch, and streams the rest from
// storage on every forward pass (model/weight_stream.hpp).
struct LoadOptions {
  // Repack the matrices whose type the kernel table can interleave (kernels/api.hpp PackedFormat).
  bool repack = true;
  // Bytes the model may use: resident weights + KV at plan.n_ctx + scratch + the stream's ring.
  // 0: what this process may really use (runtime/memory_limit.hpp: the smaller of MemAvailable
  // and the cgroup limit, less a margin).
  uint64_t mem_budget = 0;
  // The run the budget must hold (KV type and context, batch, threads, sequences); n_ctx 0 means
  // default_context() of the model.
  MemoryPlanParams plan = MemoryPlanParams{0};
  int stream_slots = kStreamSlots;
};

// The context tools use when -c is 0: the training context, at most 4096.
inline int default_context(const LlamaConfig& c) { return std::max(1, std::min(c.n_ctx_train > 0 ? c.n_ctx_train : 4096, 4096)); }

// Which matrices stay resident under a budget and what is streamed (plan_residency).
struct ResidencyPlan {
  bool streaming = false;        // false: every matrix resident (mapped or repacked), as without a budget
  uint64_t budget = 0;           // bytes planned against
  bool budget_detected = false;  // budget came from detect_memory_limit()
  uint64_t kv = 0, scratch = 0;  // reserved for KV at n_ctx and the pass's buffers
  uint64_t weights = 0;          // every matrix in its resident form (repacked size where packed)
  uint64_t resident = 0;         // matrix bytes held in memory (anonymous, pinned when allowed)
  uint64_t streamed = 0;         // bytes read from storage per forward pass
  uint64_t ring = 0;             // the stream's slots
  uint64_t staging = 0;          // its read buffers (kStreamReadBuffers of read_chunk bytes, plus alignment)
  size_t read_chunk = 0;
  uint64_t minimum = 0;          // smallest budget that runs: kv + scratch + ring + staging
  int n_slots = 0;
  size_t slot_bytes = 0;
  int64_t output_chunk_rows = 0;           // rows per unit of a streamed output matrix
  std::vector<char> resident_matrix;       // per LlamaWeights::matrices() entry
  int n_ctx = 0;
  // Seconds per token of storage reads alone at `read_bps` bytes/s.
  double read_s_per_token(double read_bps) const { return read_bps > 0 ? double(streamed) / read_bps : 0; }
};

// Units of forward(): per layer, the matrices of one matmul call; then row chunks of the output.
inline constexpr int kUnitsPerLayer = 4;  // 0: Q/K/V, 1: attention output, 2: gate/up, 3: down
inline int layer_unit(int layer, int group) { return layer * kUnitsPerLayer + group; }
inline int output_unit(int n_layer, int chunk) { return n_layer * kUnitsPerLayer + chunk; }
// Group of matrix i (LlamaWeights::matrices() order: q k v o gate up down per layer, then output).
inline int matrix_group(size_t i) {
  static constexpr int kGroup[7] = {0, 0, 0, 1, 2, 2, 3};
  return kGroup[i % 7];
}

struct LlamaLayerWeights {
  std::vector<float> attn_norm;  // [n_embd]
  MatmulWeight wq;               // [n_embd -> n_head * head_dim]
  MatmulWeight wk;               // [n_embd -> n_head_kv * head_dim]
  MatmulWeight wv;               // [n_embd -> n_head_kv * head_dim]
  std::vector<float> bq, bk, bv;  // [q_dim], [kv_dim], [kv_dim] biases; empty when the file has none
  std::vector<float> q_norm;     // [head_dim] per-head RMSNorm of Q (qwen3); empty when absent
  std::vector<float> k_norm;     // [head_dim] per-head RMSNorm of K
  MatmulWeight wo;               // [n_head * head_dim -> n_embd]
  std::vector<float> ffn_norm;   // [n_embd]
  MatmulWeight w_gate;           // [n_embd -> n_ff]
  MatmulWeight w_up;             // [n_embd -> n_ff]
  MatmulWeight w_down;           // [n_ff -> n_embd]
};

struct LlamaWeights {
  TensorView token_embd;           // [n_embd, n_vocab] (row t = embedding of token t)
  std::vector<float> output_norm;  // [n_embd]
  MatmulWeight output;             // [n_embd -> n_vocab]; token_embd when embeddings are tied
  std::vector<float> rope_freqs;   // [n_rot / 2] frequency divisors (Llama 3.1+), empty if absent
  std::vector<LlamaLayerWeights> layers;
  AnonymousMemory packed_memory;        // the repacked matrices (empty when none were); with a stream,
                                        // every resident matrix
  std::vector<std::string> repacked;    // "<tensor> (<format>)" for each, in load order
  ResidencyPlan residency;              // what the budget kept resident and what streams
  bool resident_pinned = false;         // packed_memory is mlock'ed (streaming only)
  std::unique_ptr<WeightStream> stream; // the streamed matrices' I/O thread (null: all resident)

  static LlamaWeights from_gguf(const GgufFile& f, const LlamaConfig& c, const KernelTable& kt, bool repack = true) {
    LoadOptions o;
    o.repack = repack;
    o.mem_budget = UINT64_MAX;  // no budget: everything resident
    return from_gguf(f, c, kt, o);
  }

  static LlamaWeights from_gguf(const GgufFile& f, const LlamaConfig& c, const KernelTable& kt, const LoadOptions& opt) {
    LlamaWeights w;
    // With a budget the model may stream: until the plan says so, no read-around on faults in the
    // tensor data (the norm vectors read below sit between the matrices; with the storage's
    // read-ahead each would pull megabytes of matrix pages into the page cache).
    const bool budgeted = opt.mem_budget != UINT64_MAX && f.mapped() && f.file_size() > f.data_offset();
    auto advise_data = [&](int advice) {
      if (!budgeted) return;
      const uintptr_t page = system_page_size();
      const uintptr_t b = reinterpret_cast<uintptr_t>(f.base() + f.data_offset()) & ~(page - 1);
      const uintptr_t e = reinterpret_cast<uintptr_t>(f.base() + f.file_size());
      ::madvise(reinterpret_cast<void*>(b), e - b, advice);  // advice only: a refusal changes nothing
    };
    advise_data(MADV_RANDOM);
    if (c.spec) w.names_ = c.spec->tensors;
    const TensorNames& tn = w.names_;
    const GgufTensorInfo& emb = expect(f, tn.token_embd, c.n_embd, c.n_vocab);
    EDGELLM_CHECK(can_dequantize(emb.type), "file ", f.path(), ": tensor '", tn.token_embd, "' has type ",
                  dtype_name(emb.type), ", which cannot be dequantized");
    w.token_embd = emb.view();
    w.output_norm = vector_f32(f, tn.output_norm, c.n_embd);
    w.output = matmul_weight(f, kt, c.tied_embeddings ? tn.token_embd : tn.output, c.n_embd, c.n_vocab);
    // The forward pass has no output bias: a file that carries one would be run without it.
    EDGELLM_CHECK(!f.find_tensor("output.bias"), "file ", f.path(),
                  ": tensor 'output.bias' is not supported (the output projection has no bias here)");
    if (c.has_rope_freqs) w.rope_freqs = vector_f32(f, tn.rope_freqs, c.n_rot / 2);
    // The small per-layer vectors (norms, biases) are F32 copies: always resident, whatever the budget.
    const Presence bias = c.spec ? c.spec->qkv_bias : Presence::Absent;
    const Presence qk_norm = c.spec ? c.spec->qk_norm : Presence::Absent;
    w.layers.resize(static_cast<size_t>(c.n_layer));
    for (int l = 0; l < c.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      LlamaLayerWeights& L = w.layers[static_cast<size_t>(l)];
      L.attn_norm = vector_f32(f, p + tn.attn_norm, c.n_embd);
      L.wq = matmul_weight(f, kt, p + tn.attn_q, c.n_embd, c.q_dim());
      L.wk = matmul_weight(f, kt, p + tn.attn_k, c.n_embd, c.kv_dim());
      L.wv = matmul_weight(f, kt, p + tn.attn_v, c.n_embd, c.kv_dim());
      L.bq = vector_f32_if(f, p + tn.attn_q_bias, c.q_dim(), bias);
      L.bk = vector_f32_if(f, p + tn.attn_k_bias, c.kv_dim(), bias);
      L.bv = vector_f32_if(f, p + tn.attn_v_bias, c.kv_dim(), bias);
      L.q_norm = vector_f32_if(f, p + tn.attn_q_norm, c.head_dim, qk_norm);
      L.k_norm = vector_f32_if(f, p + tn.attn_k_norm, c.head_dim, qk_norm);
      L.wo = matmul_weight(f, kt, p + tn.attn_output, c.q_dim(), c.n_embd);
      L.ffn_norm = vector_f32(f, p + tn.ffn_norm, c.n_embd);
      L.w_gate = matmul_weight(f, kt, p + tn.ffn_gate, c.n_embd, c.n_ff);
      L.w_up = matmul_weight(f, kt, p + tn.ffn_up, c.n_embd, c.n_ff);
      L.w_down = matmul_weight(f, kt, p + tn.ffn_down, c.n_ff, c.n_embd);
    }
    w.tied_ = c.tied_embeddings;
    w.residency = w.plan_residency(c, kt, opt);
    if (!w.residency.streaming) {
      advise_data(MADV_NORMAL);
      // The embedding table is read one row per token: no read-around (with a storage read-ahead
      // of megabytes, every new token's row would otherwise pull megabytes into the page cache).
      if (f.mapped()) advise_random_access(w.token_embd.data(), emb.nbytes);
      if (opt.repack) w.repack_matrices(f, kt, c.tied_embeddings);
    } else {
      w.load_resident(f, kt, c.tied_embeddings, opt.repack);
    }
    return w;
  }

  // The resident form of matrix m: its interleaved form when repack is on and the table has one.
  static const PackedFormat* resident_format(const KernelTable& kt, const MatmulWeight& m, bool repack) {
    if (!repack) return nullptr;
    const PackedFormat& pf = kt.packed_of(m.type);
    return pf.rows > 0 && pf.pack && pf.gemm && m.n_in % 32 == 0 ? &pf : nullptr;
  }

  // Keeps resident as many matrix bytes as the budget leaves after KV, scratch and the stream's
  // ring: the output matrix first when it fits (a pass without logits then reads nothing for
  // it), then the others largest first. Every matrix is read once per pass, so each resident byte
  // saves one byte of reads per token whichever matrix holds it. Throws Error naming the minimum
  // budget when even the ring does not fit.
  ResidencyPlan plan_residency(const LlamaConfig& c, const KernelTable& kt, const LoadOptions& opt) {
    ResidencyPlan p;
    MemoryPlanParams mp = opt.plan;
    if (mp.n_ctx <= 0) mp.n_ctx = default_context(c);
    p.n_ctx = mp.n_ctx;
    p.kv = kv_bytes_at_ctx(c, mp);
    p.scratch = scratch_bytes(c, mp);
    auto list = matrices(c.tied_embeddings);
    const size_t n = list.size();
    std::vector<uint64_t> res(n);
    for (size_t i = 0; i < n; ++i) {
      const MatmulWeight& m = *list[i].second;
      res[i] = resident_form_bytes(m, resident_format(kt, m, opt.repack), m.n_out);
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
    if (p.kv + p.scratch + p.weights <= p.budget) return p;

    // Streaming. The slot holds the largest unit: a layer's matmul group, or output rows chunked to that.
    p.streaming = true;
    p.n_slots = std::max(2, opt.stream_slots);
    const size_t out = n - 1;
    const MatmulWeight& ow = *list[out].second;
    const PackedFormat* opf = resident_format(kt, ow, opt.repack);
    auto group_bytes = [&](bool streamed_only) {
      uint64_t best = 0;
      for (size_t i = 0; i < out;) {
        uint64_t g = 0;
        const int grp = matrix_group(i);
        size_t j = i;
        for (; j < out && j / 7 == i / 7 && matrix_group(j) == grp; ++j)
          if (!streamed_only || !p.resident_matrix[j]) g += res[j];
        best = std::max(best, g);
        i = j;
      }
      return best;
    };
    // Chunks start on whole groups of the output's form and of kStreamRowAlign rows.
    const int64_t align = opf ? std::lcm<int64_t>(kStreamRowAlign, opf->rows) : kStreamRowAlign;
    auto chunk_rows_for = [&](uint64_t slot) {
      const uint64_t per = std::max<uint64_t>(1, resident_form_bytes(ow, opf, align));
      return std::max<int64_t>(align, int64_t(slot / per) * align);
    };
    auto slot_for = [&](bool streamed_only) {
      uint64_t slot = group_bytes(streamed_only);
      if (!streamed_only || !p.resident_matrix[out])
        slot = std::max<uint64_t>(slot, resident_form_bytes(ow, opf, std::min<int64_t>(ow.n_out, align)));
      return slot;
    };
    // Reads of up to kStreamReadBytes, or of the largest matrix when smaller (at least one packed group of rows).
    size_t chunk = 0;
    for (size_t i = 0; i < n; ++i) {
      const MatmulWeight& m = *list[i].second;
      const PackedFormat* pf = resident_format(kt, m, opt.repack);
      chunk = std::max({chunk, std::min(kStreamReadBytes, size_t(m.n_out) * m.row_bytes), size_t(pf ? pf->rows : 1) * m.row_bytes});
    }
    p.read_chunk = chunk;
    p.staging = uint64_t(kStreamReadBuffers) * WeightReader::staging_for(chunk);
    uint64_t slot = slot_for(false);
    p.minimum = p.kv + p.scratch + p.staging + uint64_t(p.n_slots) * slot;
    if (p.budget < p.minimum)
      throw_error("memory budget ", format_bytes(p.budget), " is below the minimum of ", format_bytes(p.minimum),
                  " for this model at -c ", p.n_ctx, ": KV ", format_bytes(p.kv), " + scratch ", format_bytes(p.scratch),
                  " + stream ring ", p.n_slots, " x ", format_bytes(slot), " + read buffers ", format_bytes(p.staging),
                  " (give a larger budget, a smaller -c or --kv-type q8_0)");
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
      else p.streamed += uint64_t(list[i].second->n_out) * list[i].second->row_bytes;
    }
    if (std::all_of(p.resident_matrix.begin(), p.resident_matrix.end(), [](char r) { return r != 0; })) {
      p.streaming = false;  // the ring's reservation was not needed after all
      p.ring = p.staging = 0;
    }
    return p;
  }

  // Streaming mode, at load: the resident matrices are read (O_DIRECT where possible, so the page
  // cache does not hold a second copy) into one anonymous block, repacked where a form exists,
  // and mlock'ed when the process may (else they are still anonymous memory, which only swap can
  // evict). The streamed ones keep their file view until start_stream().
  void load_resident(const GgufFile& f, const KernelTable& kt, bool tied_embeddings, bool repack) {
    auto list = matrices(tied_embeddings);
    std::vector<size_t> offset(list.size(), SIZE_MAX);
    size_t total = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!residency.resident_matrix[i]) continue;
      const MatmulWeight& m = *list[i].second;
      offset[i] = total;
      total += resident_form_bytes(m, resident_format(kt, m, repack), m.n_out);
    }
    if (total) packed_memory = AnonymousMemory(total);
    resident_pinned = total && ::mlock(packed_memory.data(), packed_memory.size()) == 0;
    WeightReader rd(f.path(), f.mapped() ? nullptr : f.base(), residency.read_chunk);
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < list.size(); ++i) {
      MatmulWeight& m = *list[i].second;
      if (list[i].first == names_.token_embd && f.mapped()) advise_random_access(m.data, size_t(m.n_out) * m.row_bytes);
      if (offset[i] == SIZE_MAX) continue;
      StreamPiece piece;
      piece.w = &m;
      piece.pf = resident_format(kt, m, repack);
      piece.row0 = 0;
      piece.row1 = m.n_out;
      piece.file_off = uint64_t(static_cast<const uint8_t*>(m.data) - f.base());
      uint8_t* dst = packed_memory.data() + offset[i];
      load_piece(rd, piece, dst);
      if (piece.pf) {
        m.packed = dst;
        m.pf = piece.pf;
        repacked.push_back(list[i].first + " (" + piece.pf->name + ")");
      } else {
        m.data = dst;
      }
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!rd.from_memory() && rd.bytes_read() >= (uint64_t(16) << 20) && dt > 0) load_read_bps = double(rd.bytes_read()) / dt;
  }

  // For -v: the residency plan in one or two lines.
  std::string describe_residency() const {
    const ResidencyPlan& p = residency;
    std::string s;
    if (!p.streaming) {
      if (p.budget)
        s = "memory budget " + format_bytes(p.budget) + (p.budget_detected ? " (detected)" : "") + ": the whole model fits (" +
            format_bytes(p.weights) + " weights + KV " + format_bytes(p.kv) + " at -c " + std::to_string(p.n_ctx) +
            " + scratch " + format_bytes(p.scratch) + "), nothing streamed\n";
      return s;
    }
    char line[512];
    std::snprintf(line, sizeof line,
                  "memory budget %s%s: weights %s resident (%s), %s streamed per pass from storage in %zu units; "
                  "KV %s at -c %d, scratch %s, ring %d x %s; minimum budget %s\n",
                  format_bytes(p.budget).c_str(), p.budget_detected ? " (detected)" : "", format_bytes(p.resident).c_str(),
                  resident_pinned ? "pinned" : "anonymous, not pinned", format_bytes(p.streamed).c_str(),
                  stream ? stream->units().size() : size_t(0), format_bytes(p.kv).c_str(), p.n_ctx, format_bytes(p.scratch).c_str(),
                  p.n_slots, format_bytes(p.slot_bytes).c_str(), format_bytes(p.minimum).c_str());
    s = line;
    if (load_read_bps > 0) {
      std::snprintf(line, sizeof line, "stream: reads measured at load %.0f MB/s%s -> at least %.2f s per token for the streamed part\n",
                    load_read_bps / 1e6, stream && stream->stats().direct_io ? " (O_DIRECT)" : "",
                    p.read_s_per_token(load_read_bps));
      s += line;
    }
    return s;
  }
  // The form a streamed matrix takes in the ring (null: the file's layout).
  const PackedFormat* stream_format(const MatmulWeight& m) const {
    for (const StreamUnit& u : stream->units())
      for (const StreamPiece& pc : u.pieces)
        if (pc.w == &m) return pc.pf;
    return nullptr;
  }
  bool tied_ = false;        // output is token_embd
  TensorNames names_{};      // the architecture's tensor names (model/arch.hpp)
  double load_read_bps = 0;  // storage read rate seen while loading the resident matrices (0: not measured)

  // Streaming mode: builds the units of the streamed matrices and starts the I/O thread. Call once
  // the weights are at their final address (the units point at these MatmulWeights).
  void start_stream(const GgufFile& f, const KernelTable& kt, const LlamaConfig& c, const LoadOptions& opt) {
    if (!residency.streaming) return;
    auto list = matrices(c.tied_embeddings);
    std::vector<StreamUnit> units;
    auto piece_of = [&](size_t i, int64_t r0, int64_t r1) {
      StreamPiece pc;
      pc.w = list[i].second;
      pc.pf = resident_format(kt, *pc.w, opt.repack);
      pc.row0 = r0;
      pc.row1 = r1;
      pc.file_off = uint64_t(static_cast<const uint8_t*>(pc.w->data) - f.base()) + uint64_t(r0) * pc.w->row_bytes;
      pc.dst_bytes = resident_form_bytes(*pc.w, pc.pf, r1 - r0);
      return pc;
    };
    auto add = [&](StreamUnit& u, StreamPiece pc) {
      pc.dst_off = u.bytes;
      u.bytes += pc.dst_bytes;
      u.file_bytes += pc.file_bytes();
      u.pieces.push_back(pc);
    };
    const size_t out = list.size() - 1;
    for (size_t i = 0; i < out;) {
      StreamUnit u;
      u.key = layer_unit(int(i / 7), matrix_group(i));
      const size_t layer = i / 7;
      const int grp = matrix_group(i);
      for (; i < out && i / 7 == layer && matrix_group(i) == grp; ++i)
        if (!residency.resident_matrix[i]) add(u, piece_of(i, 0, list[i].second->n_out));
      if (!u.pieces.empty()) units.push_back(std::move(u));
    }
    if (!residency.resident_matrix[out]) {
      const int64_t rows = list[out].second->n_out, step = residency.output_chunk_rows;
      for (int64_t r = 0, ch = 0; r < rows; r += step, ++ch) {
        StreamUnit u;
        u.key = output_unit(c.n_layer, int(ch));
        add(u, piece_of(out, r, std::min(rows, r + step)));
        units.push_back(std::move(u));
      }
    }
    stream = std::make_unique<WeightStream>(WeightReader(f.path(), f.mapped() ? nullptr : f.base(), residency.read_chunk), std::move(units),
                                            residency.n_slots);
  }

  // The architecture's tensor names; the output matrix's name (token_embd when tied).
  const TensorNames& tensor_names() const { return names_; }
  const char* output_name() const { return tied_ ? names_.token_embd : names_.output; }

  // Every matrix with its tensor name, in file-load order.
  std::vector<std::pair<std::string, MatmulWeight*>> matrices(bool tied_embeddings) {
    std::vector<std::pair<std::string, MatmulWeight*>> v;
    const TensorNames& tn = names_;
    for (size_t l = 0; l < layers.size(); ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      LlamaLayerWeights& L = layers[l];
      v.insert(v.end(), {{p + tn.attn_q, &L.wq},
                         {p + tn.attn_k, &L.wk},
                         {p + tn.attn_v, &L.wv},
                         {p + tn.attn_output, &L.wo},
                         {p + tn.ffn_gate, &L.w_gate},
                         {p + tn.ffn_up, &L.w_up},
                         {p + tn.ffn_down, &L.w_down}});
    }
    v.emplace_back(tied_embeddings ? tn.token_embd : tn.output, &output);
    return v;
  }

  // For -v: which matrices were repacked to which form, layers folded ("blk.*.ffn_up.weight x22
  // (q4_0x16)"), and which were read from the file as stored.
  std::string describe_repack() const {
    auto fold = [](const std::vector<std::string>& names) {
      std::vector<std::pair<std::string, int>> groups;
      for (const std::string& n : names) {
        std::string key = n;
        if (n.compare(0, 4, "blk.") == 0) {
          const size_t dot = n.find('.', 4);
          if (dot != std::string::npos) key = "blk.*" + n.substr(dot);
        }
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
        if (it == groups.end()) groups.emplace_back(key, 1);
        else ++it->second;
      }
      std::string s;
      for (const auto& g : groups)
        s += (s.empty() ? "" : ", ") + g.first + (g.second > 1 ? " x" + std::to_string(g.second) : "");
      return s;
    };
    std::vector<std::string> kept, streamed;
    const auto list = const_cast<LlamaWeights*>(this)->matrices(tied_);
    for (size_t i = 0; i < list.size(); ++i) {
      const MatmulWeight& m = *list[i].second;
      if (residency.streaming && !residency.resident_matrix[i]) {
        const PackedFormat* pf = stream ? stream_format(m) : nullptr;
        streamed.push_back(list[i].first + " (" + (pf ? std::string(pf->name) + ", repacked as read" : dtype_name(m.type)) + ")");
      } else if (!m.packed) {
        kept.push_back(list[i].first + " (" + dtype_name(m.type) + ")");
      }
    }
    char head[96];
    std::snprintf(head, sizeof head, "repacked %zu matrices (%.1f MiB anonymous, their file pages released)",
                  repacked.size(), double(repacked_bytes()) / (1024.0 * 1024.0));
    std::string s = repacked.empty() ? "repacked: none (no interleaved form for these types on this kernel table, or "
                                       "--no-repack)\n"
                                     : std::string(head) + ": " + fold(repacked) + "\n";
    if (!kept.empty()) s += "read from the file as stored: " + fold(kept) + "\n";
    if (!streamed.empty()) s += "streamed from storage on every pass: " + fold(streamed) + "\n";
    return s;
  }

  // Bytes of the repacked copies (0 when nothing was repacked).
  size_t repacked_bytes() const { return packed_memory.size(); }

  // Copies every matrix whose type kt can repack into one anonymous block, points the
  // MatmulWeight at it, and releases the source pages of the mapping. That includes a tied
  // token_embd: embed() still reads it through the mapping, which faults back in only the pages of
  // the rows it touches (a few KiB per distinct token) instead of keeping the whole table resident
  // next to its packed copy (Llama-3.2-1B: 213 MiB).
  void repack_matrices(const GgufFile& f, const KernelTable& kt, bool tied_embeddings) {
    auto list = matrices(tied_embeddings);
    std::vector<size_t> offset(list.size(), SIZE_MAX);
    size_t total = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const MatmulWeight& m = *list[i].second;
      const PackedFormat* pf = resident_format(kt, m, /*repack=*/true);
      if (!pf) continue;
      offset[i] = total;
      total += resident_form_bytes(m, pf, m.n_out);
    }
    if (total == 0) return;
    packed_memory = AnonymousMemory(total);
    // Every core packs (plain C++ at ~0.6 GB/s per x86 core: an 8B model's repack would otherwise
    // be tens of seconds of one A55); a matrix's groups are split across the threads.
    ThreadPool pool(default_thread_count());
    struct Fd {
      int fd = -1;
      ~Fd() {
        if (fd >= 0) ::close(fd);
      }
    } cache;
    if (f.mapped()) cache.fd = ::open(f.path().c_str(), O_RDONLY | O_CLOEXEC);  // for POSIX_FADV_DONTNEED only
    for (size_t i = 0; i < list.size(); ++i) {
      if (offset[i] == SIZE_MAX) continue;
      MatmulWeight& m = *list[i].second;
      const PackedFormat& pf = kt.packed_of(m.type);
      const size_t gb = pf.group_bytes(m.n_in);
      uint8_t* dst = packed_memory.data() + offset[i];
      const auto* src = static_cast<const uint8_t*>(m.data);
      const int64_t groups = (m.n_out + pf.rows - 1) / pf.rows;
      pool.parallel_for(groups, [&](int64_t g0, int64_t g1, int) {
        for (int64_t g = g0; g < g1; ++g) {
          const int64_t r0 = g * pf.rows;
          pf.pack(src + size_t(r0) * m.row_bytes, m.row_bytes, int(std::min<int64_t>(pf.rows, m.n_out - r0)), m.n_in,
                  dst + size_t(g) * gb);
        }
      });
      m.packed = dst;
      m.pf = &pf;
      repacked.push_back(list[i].first + " (" + pf.name + ")");
      if (!f.mapped()) continue;
      release_mapped_pages(m.data, size_t(m.n_out) * m.row_bytes);
      // ... and the page cache behind them, which a memory cgroup counts too until reclaim.
      if (cache.fd >= 0) {
        const uint64_t off = uint64_t(static_cast<const uint8_t*>(m.data) - f.base());
        ::posix_fadvise(cache.fd, off_t(off), off_t(size_t(m.n_out) * m.row_bytes), POSIX_FADV_DONTNEED);
      }
      if (list[i].first == names_.token_embd) advise_random_access(m.data, size_t(m.n_out) * m.row_bytes);
    }
  }

  // Embedding row of token `id` as floats (dequantized when the table is quantized).
  void embed(int32_t id, float* out) const {
    dequantize_row(token_embd.type(), token_embd.row(id), out, token_embd.ne(0));
  }

 private:
  static const GgufTensorInfo& expect(const GgufFile& f, const std::string& name, int64_t ne0, int64_t ne1) {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) throw_error("file ", f.path(), ": tensor '", name, "' not found");
    const int64_t want_dims = ne1 > 1 ? 2 : 1;
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1 ||
        (t->n_dims != want_dims && !(want_dims == 1 && t->n_dims == 1)))
      throw_error("file ", f.path(), ": tensor '", name, "': expected shape [", ne0, ne1 > 1 ? ", " + std::to_string(ne1) : "",
                  "], got ", t->shape().str());
    return *t;
  }
  static std::vector<float> vector_f32(const GgufFile& f, const std::string& name, int64_t n) {
    const GgufTensorInfo& t = expect(f, name, n, 1);
    EDGELLM_CHECK(can_dequantize(t.type), "file ", f.path(), ": tensor '", name, "' has unsupported type ", dtype_name(t.type));
    std::vector<float> v(static_cast<size_t>(n));
    dequantize_row(t.type, t.data, v.data(), n);
    return v;
  }
  // A vector the architecture may or may not have: empty when Absent, or Optional and not in the
  // file; a Required one that is missing is an Error naming it.
  static std::vector<float> vector_f32_if(const GgufFile& f, const std::string& name, int64_t n, Presence need) {
    if (need == Presence::Absent || (need == Presence::Optional && !f.find_tensor(name))) return {};
    return vector_f32(f, name, n);
  }
  static MatmulWeight matmul_weight(const GgufFile& f, const KernelTable& kt, const std::string& name, int64_t n_in,
                                    int64_t n_out) {
    const GgufTensorInfo& t = expect(f, name, n_in, n_out);
    if (!kt.of(t.type).vec_dot)
      throw_error("file ", f.path(), ": tensor '", name, "' has type ", dtype_name(t.type),
                  ", which edgellm cannot multiply yet");
    MatmulWeight m;
    m.type = t.type;
    m.data = t.data;
    m.n_in = n_in;
    m.n_out = n_out;
    m.row_bytes = dtype_row_bytes(t.type, n_in);
    return m;
  }
};

}  // namespace edgellm
