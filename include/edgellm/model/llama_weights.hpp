// LlamaWeights: typed, zero-copy views of a LLaMA model's tensors in the mapped GGUF file, each
// checked for name, type and shape at load time (Error says expected vs actual). Norm vectors are
// kept as F32 copies (tiny); everything else is read in place, whatever its type — except matrices
// whose type the kernel table can repack (PackedFormat, kernels/api.hpp): with repack on, those are
// copied once into a row-interleaved form in anonymous memory and the file pages they came from
// are released, so resident memory does not double. Which tensors a layer has, and what each is
// for, is the architecture table's (model/arch.hpp); under a memory budget the residency plan
// (model/residency.hpp) says what stays resident and the rest streams (model/weight_stream.hpp).
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

#include <sys/mman.h>

#include "edgellm/core/memory.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/core/tensor.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/matmul.hpp"
#include "edgellm/model/arch.hpp"
#include "edgellm/model/layer_weights.hpp"
#include "edgellm/model/llama_config.hpp"
#include "edgellm/model/memory_plan.hpp"
#include "edgellm/model/residency.hpp"
#include "edgellm/model/tensors.hpp"
#include "edgellm/model/weight_stream.hpp"
#include "edgellm/quant/dequantize.hpp"
#include "edgellm/runtime/file_reader.hpp"
#include "edgellm/runtime/thread_pool.hpp"

namespace edgellm {

// Units of forward(): per layer, the matrices of one matmul call (MatmulUnit, model/arch.hpp);
// then row chunks of the output.
inline int layer_unit(int layer, int unit) { return layer * kUnitsPerLayer + unit; }
inline int output_unit(int n_layer, int chunk) { return n_layer * kUnitsPerLayer + chunk; }

// The field of L that table row r fills (model/arch.hpp LayerField), or its entry in L.extra:
// a matrix or a vector (null for the other kind, and for a row the file does not have).
inline MatmulWeight* layer_matrix(LlamaLayerWeights& L, const LayerTensor& r) {
  if (r.field.matrix) return &(L.*r.field.matrix);
  for (LlamaLayerWeights::Extra& e : L.extra)
    if (e.row == &r) return r.role == TensorRole::Matrix ? &e.matrix : nullptr;
  return nullptr;
}
inline std::vector<float>* layer_vector(LlamaLayerWeights& L, const LayerTensor& r) {
  if (r.field.vector) return &(L.*r.field.vector);
  for (LlamaLayerWeights::Extra& e : L.extra)
    if (e.row == &r) return r.role != TensorRole::Matrix ? &e.vector : nullptr;
  return nullptr;
}

// Visits the tensors of layer `layer` that the architecture's table lists (rows: its layer rows)
// and L holds: f(row, tensor name, MatmulWeight* or null, std::vector<float>* or null). Rows the
// file did not have (optional ones) are skipped.
template <class F>
void for_each_layer_tensor(const std::vector<LayerTensor>& rows, LlamaLayerWeights& L, int layer, F&& f) {
  for (const LayerTensor& r : rows) {
    MatmulWeight* m = layer_matrix(L, r);
    std::vector<float>* v = layer_vector(L, r);
    if ((m && !m->data) || (v && v->empty()) || (!m && !v)) continue;
    f(r, layer_tensor_name(layer, r.name), m, v);
  }
}

// A matrix of the model with its tensor name and its stream unit (LlamaWeights::matrices()).
struct NamedMatrix {
  std::string name;
  MatmulWeight* w = nullptr;
  int unit_key = -1;  // layer_unit(layer, unit); -1: the output matrix
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
  bool transcoded_forms = true;         // resident-only forms taken (false: the plan streams; plan_transcoding)
  std::unique_ptr<WeightStream> stream; // the streamed matrices' I/O thread (null: all resident)

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
    // The layers, row by row of the architecture's table. The small vectors (norms, biases) are
    // F32 copies: always resident, whatever the budget.
    w.layer_rows_ = &c.arch_entry().layer;
    w.layers.resize(static_cast<size_t>(c.n_layer));
    for (int l = 0; l < c.n_layer; ++l) {
      LlamaLayerWeights& L = w.layers[static_cast<size_t>(l)];
      for (const LayerTensor& r : *w.layer_rows_) {
        const std::string name = layer_tensor_name(l, r.name);
        if (r.presence == Presence::Absent || (r.presence == Presence::Optional && !f.find_tensor(name))) continue;
        const int64_t n_in = c.dim(r.n_in), n_out = c.dim(r.n_out);
        if (r.field.extra()) {
          LlamaLayerWeights::Extra e;
          e.name = name;
          e.row = &r;
          L.extra.push_back(std::move(e));
        }
        if (MatmulWeight* m = layer_matrix(L, r)) *m = matmul_weight(f, kt, name, n_in, n_out);
        else *layer_vector(L, r) = vector_f32(f, name, n_in);
      }
    }
    w.tied_ = c.tied_embeddings;
    w.residency = w.plan_residency(c, kt, opt);
    uint64_t matrix_bytes = 0;
    for (const NamedMatrix& m : w.matrices(c.tied_embeddings)) matrix_bytes += uint64_t(m.w->n_out) * m.w->row_bytes;
    LoadProgress progress(opt.progress, matrix_bytes);
    if (!w.residency.streaming) {
      advise_data(MADV_NORMAL);
      // The embedding table is read one row per token: no read-around (with a storage read-ahead
      // of megabytes, every new token's row would otherwise pull megabytes into the page cache).
      if (f.mapped()) advise_random_access(w.token_embd.data(), emb.nbytes);
      if (opt.repack) w.repack_matrices(f, kt, c.tied_embeddings, &progress);
      else  // the matrices stay in the mapping, read as used: a step each (and a chance to stop)
        for (const NamedMatrix& m : w.matrices(c.tied_embeddings)) progress.add(uint64_t(m.w->n_out) * m.w->row_bytes);
    } else {
      w.load_resident(f, kt, c.tied_embeddings, opt.repack, &progress);
    }
    progress.add(matrix_bytes);  // (a load with no matrix at all: still below 1 until finish())
    return w;
  }

  // The resident form of matrix m (model/residency.hpp), transcoded where the plan allows.
  const PackedFormat* resident_format(const KernelTable& kt, const MatmulWeight& m, bool repack) const {
    return edgellm::resident_format(kt, m, repack, transcoded_forms);
  }

  // The residency plan of these matrices under opt (model/residency.hpp); sets transcoded_forms.
  ResidencyPlan plan_residency(const LlamaConfig& c, const KernelTable& kt, const LoadOptions& opt) {
    auto mats_of = [&](bool transcode) {
      std::vector<PlannedMatrix> mats;
      for (const NamedMatrix& m : matrices(c.tied_embeddings))
        mats.push_back(planned_matrix(*m.w, edgellm::resident_format(kt, *m.w, opt.repack, transcode), m.unit_key));
      return mats;
    };
    return plan_transcoding(mats_of, c, opt, &transcoded_forms);
  }

  // Streaming mode, at load: the resident matrices are read (O_DIRECT where possible, so the page
  // cache does not hold a second copy) into one anonymous block, repacked where a form exists,
  // and mlock'ed when the process may (else they are still anonymous memory, which only swap can
  // evict). The streamed ones keep their file view until start_stream().
  void load_resident(const GgufFile& f, const KernelTable& kt, bool tied_embeddings, bool repack, LoadProgress* progress = nullptr) {
    auto list = matrices(tied_embeddings);
    std::vector<size_t> offset(list.size(), SIZE_MAX);
    size_t total = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!residency.resident_matrix[i]) continue;
      const MatmulWeight& m = *list[i].w;
      offset[i] = total;
      total += resident_form_bytes(m, resident_format(kt, m, repack), m.n_out);
    }
    if (total) packed_memory = AnonymousMemory(total);
    resident_pinned = total && ::mlock(packed_memory.data(), packed_memory.size()) == 0;
    FileReader rd(f.path(), f.mapped() ? nullptr : f.base(), residency.read_chunk);
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < list.size(); ++i) {
      MatmulWeight& m = *list[i].w;
      if (list[i].name == names_.token_embd && f.mapped()) advise_random_access(m.data, size_t(m.n_out) * m.row_bytes);
      if (progress) progress->add(uint64_t(m.n_out) * m.row_bytes);
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
        repacked.push_back(list[i].name + " (" + piece.pf->name + ")");
      } else {
        m.data = dst;
      }
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!rd.from_memory() && rd.bytes_read() >= (uint64_t(16) << 20) && dt > 0) load_read_bps = double(rd.bytes_read()) / dt;
  }

  // For -v: the residency plan in one or two lines (model/residency.hpp).
  std::string describe_residency() const {
    return edgellm::describe_residency(residency, resident_pinned, stream ? stream->units().size() : 0, load_read_bps,
                                       stream && stream->stats().direct_io);
  }
  // The form a streamed matrix takes in the ring (null: the file's layout).
  const PackedFormat* stream_format(const MatmulWeight& m) const {
    for (const StreamUnit& u : stream->units())
      for (const StreamPiece& pc : u.pieces)
        if (pc.w == &m) return pc.pf;
    return nullptr;
  }
  bool tied_ = false;        // output is token_embd
  TensorNames names_{};      // the architecture's names of the tensors outside the layers (model/arch.hpp)
  const std::vector<LayerTensor>* layer_rows_ = nullptr;  // the architecture's layer table (model/arch.hpp)
  double load_read_bps = 0;  // storage read rate seen while loading the resident matrices (0: not measured)

  // Streaming mode: builds the units of the streamed matrices and starts the I/O thread. Call once
  // the weights are at their final address (the units point at these MatmulWeights).
  void start_stream(const GgufFile& f, const KernelTable& kt, const LlamaConfig& c, const LoadOptions& opt) {
    if (!residency.streaming) return;
    auto list = matrices(c.tied_embeddings);
    std::vector<StreamUnit> units;
    auto piece_of = [&](size_t i, int64_t r0, int64_t r1) {
      StreamPiece pc;
      pc.w = list[i].w;
      pc.pf = edgellm::stream_format(kt, *pc.w, opt.repack);
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
      u.key = list[i].unit_key;
      for (; i < out && list[i].unit_key == u.key; ++i)
        if (!residency.resident_matrix[i]) add(u, piece_of(i, 0, list[i].w->n_out));
      if (!u.pieces.empty()) units.push_back(std::move(u));
    }
    if (!residency.resident_matrix[out]) {
      const int64_t rows = list[out].w->n_out, step = residency.output_chunk_rows;
      for (int64_t r = 0, ch = 0; r < rows; r += step, ++ch) {
        StreamUnit u;
        u.key = output_unit(c.n_layer, int(ch));
        add(u, piece_of(out, r, std::min(rows, r + step)));
        units.push_back(std::move(u));
      }
    }
    stream = std::make_unique<WeightStream>(FileReader(f.path(), f.mapped() ? nullptr : f.base(), residency.read_chunk), std::move(units),
                                            residency.n_slots);
  }

  // The architecture's tensor names; the output matrix's name (token_embd when tied).
  const TensorNames& tensor_names() const { return names_; }
  const char* output_name() const { return tied_ ? names_.token_embd : names_.output; }

  // Every matrix with its tensor name and stream unit: layer by layer, in the order forward()
  // calls its matmul units (a unit's matrices in table order), then the output matrix.
  std::vector<NamedMatrix> matrices(bool tied_embeddings) {
    std::vector<NamedMatrix> v;
    for (size_t l = 0; l < layers.size(); ++l) {
      LlamaLayerWeights& L = layers[l];
      std::vector<NamedMatrix> layer;
      for_each_layer_tensor(*layer_rows_, L, int(l), [&](const LayerTensor& r, std::string name, MatmulWeight* m, std::vector<float>*) {
        if (m) layer.push_back({std::move(name), m, layer_unit(int(l), r.unit)});
      });
      std::stable_sort(layer.begin(), layer.end(), [](const NamedMatrix& a, const NamedMatrix& b) { return a.unit_key < b.unit_key; });
      v.insert(v.end(), layer.begin(), layer.end());
    }
    v.push_back({tied_embeddings ? names_.token_embd : names_.output, &output, -1});
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
      const MatmulWeight& m = *list[i].w;
      if (residency.streaming && !residency.resident_matrix[i]) {
        const PackedFormat* pf = stream ? stream_format(m) : nullptr;
        streamed.push_back(list[i].name + " (" + (pf ? std::string(pf->name) + ", repacked as read" : dtype_name(m.type)) + ")");
      } else if (!m.packed) {
        kept.push_back(list[i].name + " (" + dtype_name(m.type) + ")");
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
  void repack_matrices(const GgufFile& f, const KernelTable& kt, bool tied_embeddings, LoadProgress* progress = nullptr) {
    auto list = matrices(tied_embeddings);
    std::vector<size_t> offset(list.size(), SIZE_MAX);
    size_t total = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const MatmulWeight& m = *list[i].w;
      const PackedFormat* pf = resident_format(kt, m, /*repack=*/true);
      if (!pf) continue;
      offset[i] = total;
      total += resident_form_bytes(m, pf, m.n_out);
    }
    if (total == 0) {  // no packed form here (an ARMv8.0 table, say): the matrices stay mapped, a step each
      if (progress)
        for (const NamedMatrix& m : list) progress->add(uint64_t(m.w->n_out) * m.w->row_bytes);
      return;
    }
    packed_memory = AnonymousMemory(total);
    // Every core packs (plain C++ at ~0.6 GB/s per x86 core: an 8B model's repack would otherwise
    // be tens of seconds of one A55); a matrix's groups are split across the threads.
    ThreadPool pool(default_thread_count());
    std::unique_ptr<PageCacheDropper> cache;
    if (f.mapped()) cache = std::make_unique<PageCacheDropper>(f.path());
    for (size_t i = 0; i < list.size(); ++i) {
      MatmulWeight& m = *list[i].w;
      if (progress) progress->add(uint64_t(m.n_out) * m.row_bytes);  // (before: the first call says 0 is done)
      if (offset[i] == SIZE_MAX) continue;
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
      repacked.push_back(list[i].name + " (" + pf.name + ")");
      if (!f.mapped()) continue;
      release_mapped_pages(m.data, size_t(m.n_out) * m.row_bytes);
      // ... and the page cache behind them, which a memory cgroup counts too until reclaim.
      cache->drop(uint64_t(static_cast<const uint8_t*>(m.data) - f.base()), size_t(m.n_out) * m.row_bytes);
      if (list[i].name == names_.token_embd) advise_random_access(m.data, size_t(m.n_out) * m.row_bytes);
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
