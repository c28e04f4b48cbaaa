// LlamaWeights: typed, zero-copy views of a LLaMA model's tensors in the mapped GGUF file, each
// checked for name, type and shape at load time (Error says expected vs actual). Norm vectors are
// kept as F32 copies (tiny); everything else is read in place, whatever its type — except matrices
// whose type the kernel table can repack (PackedFormat, kernels/api.hpp): with repack on, those are
// copied once into a row-interleaved form in anonymous memory and the file pages they came from
// are released, so resident memory does not double.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "edgellm/core/memory.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/core/tensor.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/matmul.hpp"
#include "edgellm/model/llama_config.hpp"
#include "edgellm/quant/ref.hpp"
#include "edgellm/runtime/thread_pool.hpp"

namespace edgellm {

struct LlamaLayerWeights {
  std::vector<float> attn_norm;  // [n_embd]
  MatmulWeight wq;               // [n_embd -> n_head * head_dim]
  MatmulWeight wk;               // [n_embd -> n_head_kv * head_dim]
  MatmulWeight wv;               // [n_embd -> n_head_kv * head_dim]
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
  AnonymousMemory packed_memory;        // the repacked matrices (empty when none were)
  std::vector<std::string> repacked;    // "<tensor> (<format>)" for each, in load order

  static LlamaWeights from_gguf(const GgufFile& f, const LlamaConfig& c, const KernelTable& kt, bool repack = true) {
    LlamaWeights w;
    const GgufTensorInfo& emb = expect(f, "token_embd.weight", c.n_embd, c.n_vocab);
    EDGELLM_CHECK(can_dequantize(emb.type), "file ", f.path(), ": tensor 'token_embd.weight' has type ",
                  dtype_name(emb.type), ", which cannot be dequantized");
    w.token_embd = emb.view();
    w.output_norm = vector_f32(f, "output_norm.weight", c.n_embd);
    w.output = c.tied_embeddings ? matmul_weight(f, kt, "token_embd.weight", c.n_embd, c.n_vocab)
                                 : matmul_weight(f, kt, "output.weight", c.n_embd, c.n_vocab);
    if (c.has_rope_freqs) w.rope_freqs = vector_f32(f, "rope_freqs.weight", c.n_rot / 2);
    w.layers.resize(static_cast<size_t>(c.n_layer));
    for (int l = 0; l < c.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      LlamaLayerWeights& L = w.layers[static_cast<size_t>(l)];
      L.attn_norm = vector_f32(f, p + "attn_norm.weight", c.n_embd);
      L.wq = matmul_weight(f, kt, p + "attn_q.weight", c.n_embd, c.q_dim());
      L.wk = matmul_weight(f, kt, p + "attn_k.weight", c.n_embd, c.kv_dim());
      L.wv = matmul_weight(f, kt, p + "attn_v.weight", c.n_embd, c.kv_dim());
      L.wo = matmul_weight(f, kt, p + "attn_output.weight", c.q_dim(), c.n_embd);
      L.ffn_norm = vector_f32(f, p + "ffn_norm.weight", c.n_embd);
      L.w_gate = matmul_weight(f, kt, p + "ffn_gate.weight", c.n_embd, c.n_ff);
      L.w_up = matmul_weight(f, kt, p + "ffn_up.weight", c.n_embd, c.n_ff);
      L.w_down = matmul_weight(f, kt, p + "ffn_down.weight", c.n_ff, c.n_embd);
    }
    if (repack) w.repack_matrices(f, kt, c.tied_embeddings);
    return w;
  }

  // Every matrix with its tensor name, in file-load order.
  std::vector<std::pair<std::string, MatmulWeight*>> matrices(bool tied_embeddings) {
    std::vector<std::pair<std::string, MatmulWeight*>> v;
    for (size_t l = 0; l < layers.size(); ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      LlamaLayerWeights& L = layers[l];
      v.insert(v.end(), {{p + "attn_q.weight", &L.wq},
                         {p + "attn_k.weight", &L.wk},
                         {p + "attn_v.weight", &L.wv},
                         {p + "attn_output.weight", &L.wo},
                         {p + "ffn_gate.weight", &L.w_gate},
                         {p + "ffn_up.weight", &L.w_up},
                         {p + "ffn_down.weight", &L.w_down}});
    }
    v.emplace_back(tied_embeddings ? "token_embd.weight" : "output.weight", &output);
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
    std::vector<std::string> kept;
    for (const auto& m : const_cast<LlamaWeights*>(this)->matrices(output.data == token_embd.data()))
      if (!m.second->packed) kept.push_back(m.first + " (" + dtype_name(m.second->type) + ")");
    char head[96];
    std::snprintf(head, sizeof head, "repacked %zu matrices (%.1f MiB anonymous, their file pages released)",
                  repacked.size(), double(repacked_bytes()) / (1024.0 * 1024.0));
    std::string s = repacked.empty() ? "repacked: none (no interleaved form for these types on this kernel table, or "
                                       "--no-repack)\n"
                                     : std::string(head) + ": " + fold(repacked) + "\n";
    if (!kept.empty()) s += "read from the file as stored: " + fold(kept) + "\n";
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
    auto packable = [&](const MatmulWeight& m) {
      const PackedFormat& pf = kt.packed_of(m.type);
      return pf.rows > 0 && pf.pack && pf.gemm && m.n_in % 32 == 0;
    };
    std::vector<size_t> offset(list.size(), SIZE_MAX);
    size_t total = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const MatmulWeight& m = *list[i].second;
      if (!packable(m)) continue;
      const PackedFormat& pf = kt.packed_of(m.type);
      offset[i] = total;
      const size_t groups = size_t((m.n_out + pf.rows - 1) / pf.rows);
      total += (groups * pf.group_bytes(m.n_in) + kDefaultAlignment - 1) / kDefaultAlignment * kDefaultAlignment;
    }
    if (total == 0) return;
    packed_memory = AnonymousMemory(total);
    // Every core packs (plain C++ at ~0.6 GB/s per x86 core: an 8B model's repack would otherwise
    // be tens of seconds of one A55); a matrix's groups are split across the threads.
    ThreadPool pool(default_thread_count());
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
      if (list[i].first == "token_embd.weight") advise_random_access(m.data, size_t(m.n_out) * m.row_bytes);
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
