// matmul(): y = x W^T for one weight matrix, through a KernelTable. Activation rows are quantized
// once into scratch, then decode (one token) runs a GEMV with rows split over threads, prefill
// (several tokens) runs row tiles x token tiles so each weight tile is reused while in cache.
// Work is handed out in chunks from an atomic counter (robust to a busy or slower core).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/layouts/unpack_u8.hpp"
#include "edgellm/runtime/thread_pool.hpp"

namespace edgellm {

// A weight matrix in its stored type: n_out rows of n_in elements, row r at data + r * row_bytes.
struct MatmulWeight {
  DType type;
  const void* data;  // [n_out, row_bytes]
  int64_t n_in;
  int64_t n_out;
  size_t row_bytes;  // >= dtype_row_bytes(type, n_in)
  // Optional row-interleaved copy (kernels/api.hpp PackedFormat), made at load: when set, matmul
  // reads it instead of data. packed holds ceil(n_out / pf->rows) groups of pf->group_bytes(n_in).
  const void* packed = nullptr;
  const PackedFormat* pf = nullptr;
};

// Holds the quantized activation rows of one matmul call. Reused across calls (it only grows).
// Not shareable between threads calling matmul at the same time: one per calling thread.
class MatmulScratch {
 public:
  uint8_t* get(size_t bytes) {
    if (buf_.size() < bytes) buf_.resize(bytes);
    return buf_.data();
  }

 private:
  std::vector<uint8_t> buf_;
};

namespace detail {

// Rows per tile in prefill: a tile of weight rows (tens of KB) stays in L1/L2 while every token of a
// token tile passes over it; a token tile of quantized activations stays in L2.
inline constexpr int64_t kMatmulRowTile = 16;
inline constexpr int64_t kMatmulTokTile = 64;
// Below this many weights a GEMV is not split over threads (~5 us on one x86 core).
inline constexpr int64_t kMinParallelWeights = int64_t(1) << 17;
// Decode of several activation rows (matmul_decode_rows): the weight rows run this many at a time
// for all activation rows before moving on, so they are read from memory once and stay in cache.
inline constexpr int64_t kDecodeRowsTile = 64;

// out[0 .. nrows) = dot(row r0 + r, act) for one activation row.
inline void dot_rows(const TypeKernels& k, const MatmulWeight& w, int64_t r0, int64_t nrows, const void* act,
                     float* out) {
  const auto* base = static_cast<const uint8_t*>(w.data) + size_t(r0) * w.row_bytes;
  if (k.vec_dot_rows) {
    k.vec_dot_rows(int(w.n_in), out, int(nrows), base, w.row_bytes, act);
    return;
  }
  for (int64_t r = 0; r < nrows; ++r) out[r] = k.vec_dot(int(w.n_in), base + size_t(r) * w.row_bytes, act);
}

// Decode GEMV over rows [r0, r1) one row per kernel call, in memory order, each row's successor
// kStreamAhead bytes further prefetched while it is computed: one sequential stream per thread,
// which DRAM serves far better than the interleaved streams of a multi-row kernel (docs/PERF.md,
// "Kernel constants").
inline constexpr size_t kStreamAhead = 2048;
inline void gemv_stream(const TypeKernels& k, const MatmulWeight& w, int64_t r0, int64_t r1, const void* act,
                        float* out) {
  const auto* row = static_cast<const uint8_t*>(w.data) + size_t(r0) * w.row_bytes;
  const size_t rb = w.row_bytes;
  for (int64_t r = r0; r < r1; ++r, row += rb) {
    for (size_t o = 0; o < rb; o += 64) __builtin_prefetch(row + kStreamAhead + o, 0, 3);
    out[r - r0] = k.vec_dot(int(w.n_in), row, act);
  }
}

// Runs f(begin, end) over [0, units) in chunks handed out from an atomic counter, so a thread that
// is descheduled (shared machine) or slower (big.LITTLE) does not hold the others up. Chunks are
// 1/8 of a thread's share, shrinking towards the end (half of what is left split between the
// threads, at least 1/32 of a share) so that the threads finish close together: with fixed 1/8
// chunks the pool's threads spent 5.3 % of a TinyLlama Q4_K_M decode's samples waiting, 3.5 % with
// these (perf, 2 threads, x86 dev VM).
template <class F>
inline void run_chunked(ThreadPool* pool, int64_t units, F&& f) {
  if (!pool || pool->n_threads() == 1 || units <= 1) {
    f(int64_t(0), units);
    return;
  }
  const int64_t nt = pool->n_threads();
  const int64_t chunk = std::max<int64_t>(1, units / (nt * 8)), least = std::max<int64_t>(1, units / (nt * 32));
  std::atomic<int64_t> next{0};
  pool->parallel_for(nt, [&](int64_t, int64_t, int) {
    int64_t b = next.load(std::memory_order_relaxed);
    while (b < units) {
      const int64_t c = std::max(least, std::min(chunk, (units - b) / (2 * nt)));
      if (next.compare_exchange_weak(b, b + c, std::memory_order_relaxed)) {
        f(b, std::min(units, b + c));
        b = next.load(std::memory_order_relaxed);
      }
    }
  });
}

// Most rows a PackedFormat may interleave (decode keeps a partial group's outputs on the stack).
inline constexpr int kMaxPackedRows = 64;

inline void check_matmul(const TypeKernels& k, const MatmulWeight& w, DType act_type, bool have_from_float) {
  EDGELLM_CHECK(k.vec_dot != nullptr, "matmul: no kernel multiplies weights of type ", dtype_name(w.type));
  EDGELLM_CHECK(w.n_in > 0 && w.n_out >= 0 && w.n_in <= INT32_MAX, "matmul: bad weight shape [", w.n_out, ", ",
                w.n_in, "]");
  EDGELLM_CHECK(w.row_bytes >= dtype_row_bytes(w.type, w.n_in), "matmul: row_bytes ", w.row_bytes, " < ",
                dtype_row_bytes(w.type, w.n_in), " needed for ", w.n_in, " ", dtype_name(w.type), " elements");
  EDGELLM_CHECK(w.n_in % dtype_block_size(act_type) == 0, "matmul: n_in ", w.n_in,
                " is not a multiple of the activation block size ", dtype_block_size(act_type), " (",
                dtype_name(act_type), ")");
  EDGELLM_CHECK(have_from_float, "matmul: no activation quantizer to ", dtype_name(act_type));
  EDGELLM_CHECK(!w.packed || (w.pf && w.pf->rows > 0 && w.pf->rows <= kMaxPackedRows && w.pf->gemm &&
                               (!w.pf->unpack_u8 || w.pf->rows == 1)),
                "matmul: packed weight without a usable PackedFormat");
}

// Decode work units: a packed group, kStreamRows streamed rows, or rows_per_call rows.
inline constexpr int64_t kStreamRows = 16;
inline int64_t decode_unit_rows(const KernelTable& kt, const MatmulWeight& w) {
  if (w.packed) return w.pf->rows;
  if (kt.stream_decode) return kStreamRows;
  return std::max(1, kt.of(w.type).rows_per_call);
}

// Bytes of one activation row in the form w's kernels read.
inline size_t act_row_bytes(const KernelTable& kt, const MatmulWeight& w) {
  if (w.packed) return w.pf->act_bytes(w.n_in);
  const DType at = kt.of(w.type).vec_dot_type;
  return at == DType::F32 ? size_t(w.n_in) * sizeof(float) : dtype_row_bytes(at, w.n_in);
}

// One activation row x into that form at buf; returns where the kernels should read it (x itself
// for F32 activations).
inline const void* prepare_act_row(const KernelTable& kt, const MatmulWeight& w, const float* x, uint8_t* buf) {
  if (w.packed) {
    w.pf->prepare_act(x, w.n_in, buf);
    return buf;
  }
  const DType at = kt.of(w.type).vec_dot_type;
  if (at == DType::F32) return x;
  kt.of(at).from_float(x, buf, w.n_in);
  return buf;
}

// y[r] for the rows of decode units [u0, u1) of w against one prepared activation row.
inline void decode_units(const KernelTable& kt, const MatmulWeight& w, int64_t u0, int64_t u1, const void* act,
                         float* y) {
  const int64_t ur = decode_unit_rows(kt, w);
  if (w.packed) {
    const size_t gb = w.pf->group_bytes(w.n_in);
    for (int64_t g = u0; g < u1; ++g) {
      const int64_t r0 = g * ur;
      const auto* grp = static_cast<const uint8_t*>(w.packed) + size_t(g) * gb;
      if (r0 + ur <= w.n_out) {
        w.pf->gemm(w.n_in, grp, act, 1, y + r0, size_t(ur));
      } else {
        float tmp[kMaxPackedRows];
        w.pf->gemm(w.n_in, grp, act, 1, tmp, size_t(ur));
        std::memcpy(y + r0, tmp, sizeof(float) * size_t(w.n_out - r0));
      }
    }
    return;
  }
  const int64_t r0 = u0 * ur, r1 = std::min(w.n_out, u1 * ur);
  if (kt.stream_decode) gemv_stream(kt.of(w.type), w, r0, r1, act, y + r0);
  else dot_rows(kt.of(w.type), w, r0, r1 - r0, act, y + r0);
}

// Prefill of a packed weight: every activation row prepared once, then threads take ranges of
// groups and run each token tile over each group (a group, ~18 KB for 16 rows of 2048 q4_0, stays
// in L1/L2 while the tile passes).
// Prefill through a packed form's GEMM: the weight's groups, or (pf a form with prefill_gemm and w
// in place) each group packed from the file's rows first, once per group.
inline void matmul_packed_prefill(ThreadPool* pool, const MatmulWeight& w, const PackedFormat& pf, const float* x,
                                  int64_t n_tok, float* y, MatmulScratch& scratch) {
  const auto gemm = pf.prefill_gemm ? pf.prefill_gemm : pf.gemm;
  const int64_t rows = pf.rows, n = w.n_in;
  const size_t ab = pf.act_bytes(n), gb = pf.group_bytes(n);
  uint8_t* act = scratch.get(ab * size_t(n_tok));
  auto prep = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) pf.prepare_act(x + t * n, n, act + size_t(t) * ab);
  };
  if (pool) pool->parallel_for(n_tok, prep);
  else prep(0, n_tok, 0);
  const int64_t groups = (w.n_out + rows - 1) / rows;
  // One group against tokens t0 .. t0 + nt.
  const auto group_tokens = [&](const uint8_t* grp, int64_t r0, int64_t t0, int nt, std::vector<float>& tmp) {
    const uint8_t* a = act + size_t(t0) * ab;
    if (r0 + rows <= w.n_out) {
      gemm(n, grp, a, nt, y + t0 * w.n_out + r0, size_t(w.n_out));
      return;
    }
    tmp.resize(size_t(nt) * size_t(rows));
    gemm(n, grp, a, nt, tmp.data(), size_t(rows));
    for (int t = 0; t < nt; ++t)
      std::memcpy(y + (t0 + t) * w.n_out + r0, tmp.data() + size_t(t) * size_t(rows), sizeof(float) * size_t(w.n_out - r0));
  };
  run_chunked(pool, groups, [&](int64_t g0, int64_t g1) {
    thread_local std::vector<float> tmp;
    thread_local std::vector<uint8_t> packed;  // a group packed from the file's rows
    if (!w.packed) {
      packed.resize(gb);
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t r0 = g * rows;
        pf.pack(static_cast<const uint8_t*>(w.data) + size_t(r0) * w.row_bytes, w.row_bytes,
                int(std::min(rows, w.n_out - r0)), n, packed.data());
        for (int64_t t0 = 0; t0 < n_tok; t0 += kMatmulTokTile)
          group_tokens(packed.data(), r0, t0, int(std::min(kMatmulTokTile, n_tok - t0)), tmp);
      }
      return;
    }
    for (int64_t t0 = 0; t0 < n_tok; t0 += kMatmulTokTile)
      for (int64_t g = g0; g < g1; ++g)
        group_tokens(static_cast<const uint8_t*>(w.packed) + size_t(g) * gb, g * rows, t0,
                     int(std::min(kMatmulTokTile, n_tok - t0)), tmp);
  });
}

// Prefill through the table's u8 GEMM (KernelTable::u8_gemm) where it has one.
inline constexpr int64_t kGemmMinTokens = 4;
inline constexpr int64_t kGemmRowTile = 16;  // rows unpacked together (a multiple of the tile's rows)
inline constexpr int kGemmMaxTile = 64;      // rows x toks of the largest register tile a table may give

using U8TileFn = decltype(U8GemmKernel::tile);
// The table's tile for weights of type t against activations act, and the weight form it reads:
// the signed-offset K form where the table has its tile and the type's values fit it (ks_max_w),
// else the K form or the signed forms where the table has that tile (the K form only where the type's
// bytes fit max_u: IQ4_XS's reach 240; there IQ4_XS takes the signed K form), else the unsigned form if its bytes fit the tile (max_u);
// null where none fits.
inline U8TileFn u8_gemm_tile(const KernelTable& kt, DType t, DType act, U8Form& form) {
  const U8GemmKernel& g = kt.u8_gemm;
  form = U8Form::Unsigned;
  if (!g.tile) return nullptr;  // the unsigned tile is the table's u8 GEMM; the others extend it
  if (g.tile_ks && has_kscales(t) && act == DType::Q8_K && u8_form_offset(t) >= 0 && u8_form_max_abs(t) <= g.ks_max_w) {
    form = U8Form::KSigned;
    return g.tile_ks_narrow && u8_form_max_abs(t) <= g.ks_narrow_max_w ? g.tile_ks_narrow : g.tile_ks;
  }
  if (g.tile_k && has_kscales(t) && act == DType::Q8_K && u8_form_max(t) <= g.max_u) {
    form = U8Form::KScales;
    return g.tile_k_narrow && u8_form_max(t) <= g.narrow_max_u ? g.tile_k_narrow : g.tile_k;
  }
  if (g.tile_sk && has_signed_k_form(t) && act == DType::Q8_K && u8_form_max(t) > g.max_u) {
    form = U8Form::SignedK;
    return g.tile_sk;
  }
  if (g.tile_s8 && has_signed_form(t) && u8_form_max(t) > g.max_u) {
    form = U8Form::Signed;
    return g.tile_s8;
  }
  return u8_form_max(t) <= g.max_u ? g.tile : nullptr;
}
inline bool gemm_u8_applies(const KernelTable& kt, const MatmulWeight& w, int64_t n_tok,
                            int64_t min_tokens = kGemmMinTokens) {
  const DType act = kt.of(w.type).vec_dot_type;
  U8Form form;
  return n_tok >= min_tokens && w.n_in % 128 == 0 && can_unpack_u8(w.type) &&
         (act == DType::Q8_0 || act == DType::Q8_1 || act == DType::Q8_K) && kt.of(act).from_float != nullptr &&
         u8_gemm_tile(kt, w.type, act, form) != nullptr;
}

// y[t, r] for all tokens: activations packed once; each thread unpacks a tile of weight rows
// and runs every token over it, one register tile (u8_gemm.toks tokens x u8_gemm.rows rows) per call.
inline void matmul_gemm_u8(const KernelTable& kt, ThreadPool* pool, const MatmulWeight& w, DType act_type,
                           const float* x, int64_t n_tok, float* y, MatmulScratch& scratch) {
  const U8GemmKernel& g = kt.u8_gemm;
  const FromFloatFn quantize = kt.of(act_type).from_float;
  U8Form form;
  const U8TileFn tile_fn = u8_gemm_tile(kt, w.type, act_type, form);
  EDGELLM_CHECK(tile_fn != nullptr, "u8 GEMM: no tile of this table takes ", dtype_name(w.type), " weights");
  const bool grouped = form != U8Form::Unsigned;  // rows packed in interleaved groups of the tile's rows
  const int64_t R = grouped ? g.group_rows : g.rows, C = g.toks;
  EDGELLM_CHECK(R >= 1 && C >= 1 && R * C <= kGemmMaxTile && kGemmRowTile % R == 0 && (!grouped || R % kGroupRows == 0),
                "u8 GEMM: register tile ", R, " x ", C, " does not fit the driver");
  const int64_t n = w.n_in, n_tok_pad = (n_tok + C - 1) / C * C;
  const size_t rb = u8_gemm_row_bytes(n);
  uint8_t* act = scratch.get(rb * size_t(n_tok_pad));  // [n_tok_pad] GEMM rows
  auto pack = [&](int64_t t0, int64_t t1, int) {
    std::vector<uint8_t> q(dtype_row_bytes(act_type, n));
    for (int64_t t = t0; t < t1; ++t) {
      const U8GemmRow row = U8GemmRow::at(act, n, t);
      u8_gemm_pack_act_row(act_type, quantize, x + t * n, n, row, q.data());
      if (form == U8Form::KSigned) u8_gemm_bias_act(row, n);  // the tile reads a + 128
    }
  };
  if (pool) pool->parallel_for(n_tok, pack);
  else pack(0, n_tok, 0);
  std::memset(act + rb * size_t(n_tok), 0, rb * size_t(n_tok_pad - n_tok));

  const int64_t tiles = (w.n_out + kGemmRowTile - 1) / kGemmRowTile;
  run_chunked(pool, tiles, [&](int64_t tile0, int64_t tile1) {
    thread_local std::vector<uint8_t> wbuf;  // [kGemmRowTile] GEMM rows
    thread_local std::vector<float> s16;
    thread_local std::vector<uint8_t> gscratch;
    thread_local std::vector<uint8_t> file_rows;  // a group's rows in the file's bytes (to_file_row)
    wbuf.resize(rb * size_t(kGemmRowTile));
    const bool to_file = w.packed && w.pf->to_file_row;
    const size_t file_rb = dtype_row_bytes(w.type, n);
    if (to_file) file_rows.resize(file_rb * size_t(kGroupRows));
    if (grouped) gscratch.resize(u8_gemm_group_scratch(n));
    else s16.resize(u8_gemm_pack_scratch(n));
    for (int64_t tile = tile0; tile < tile1; ++tile) {
      const int64_t r0 = tile * kGemmRowTile, nr = std::min(kGemmRowTile, w.n_out - r0);
      const int64_t nr_pad = (nr + R - 1) / R * R;
      // a packed weight: a one-row form's groups, unpacked by the form's unpacker (unpack_u8), or
      // with to_file_row (any rows a group) its rows in the file's bytes, each in its own slot
      const auto wrow = [&](int64_t r) -> const uint8_t* {
        if (!w.packed) return static_cast<const uint8_t*>(w.data) + size_t(r0 + r) * w.row_bytes;
        const int64_t gr = w.pf->rows;
        const uint8_t* g = static_cast<const uint8_t*>(w.packed) + size_t((r0 + r) / gr) * w.pf->group_bytes(n);
        if (!to_file) return g;
        uint8_t* f = file_rows.data() + size_t(r % kGroupRows) * file_rb;
        w.pf->to_file_row(g, n, int((r0 + r) % gr), f);
        return f;
      };
      const UnpackRowU8Fn unpack = w.packed && !to_file ? w.pf->unpack_u8 : nullptr;
      if (grouped) {
        for (int64_t rg = 0; rg < nr_pad; rg += kGroupRows) {  // a register tile may take several groups
          const void* rows[kGroupRows];
          // A 16-row tile's second group may have no rows (cnt 0): u8_gemm_pack_group zeroes every
          // group of fewer than kGroupRows rows, so the tile reads zeros there (test_dot_iquants' 5 rows).
          const int cnt = int(std::max<int64_t>(0, std::min<int64_t>(kGroupRows, nr - rg)));
          for (int r = 0; r < cnt; ++r) rows[r] = wrow(rg + r);
          u8_gemm_pack_group(w.type, form, rows, cnt, n, U8GemmRow::at(wbuf.data(), n, rg).u, gscratch.data(), g.interleave,
                             unpack);
        }
      } else {
        for (int64_t r = 0; r < nr; ++r)
          u8_gemm_pack_weight_row(w.type, wrow(r), n, U8GemmRow::at(wbuf.data(), n, r), s16.data(), unpack);
        std::memset(wbuf.data() + rb * size_t(nr), 0, rb * size_t(nr_pad - nr));
      }
      for (int64_t t0 = 0; t0 < n_tok_pad; t0 += C) {
        U8GemmRow ar[kGemmMaxTile];
        for (int64_t c = 0; c < C; ++c) ar[c] = U8GemmRow::at(act, n, t0 + c);
        for (int64_t rr = 0; rr < nr_pad; rr += R) {
          U8GemmRow wr[kGemmMaxTile];
          for (int64_t r = 0; r < R; ++r) wr[r] = U8GemmRow::at(wbuf.data(), n, rr + r);
          float out[kGemmMaxTile];
          tile_fn(n, wr, ar, out, size_t(R));
          for (int64_t c = 0; c < C && t0 + c < n_tok; ++c)
            for (int64_t r = 0; r < R && rr + r < nr; ++r) y[(t0 + c) * w.n_out + r0 + rr + r] = out[c * R + r];
        }
      }
    }
  });
}

}  // namespace detail

namespace detail {

// Decode arithmetic for each of n_tok activation rows: row t's outputs are exactly what matmul
// computes for that row alone (n_tok = 1), while the weights are read once for all rows (the
// rows run over a few decode units at a time, which stay in cache).
inline void matmul_decode_rows(const KernelTable& kt, ThreadPool* pool, const MatmulWeight& w, const float* x,
                               int64_t n_tok, float* y, MatmulScratch& scratch) {
  const size_t ab = act_row_bytes(kt, w);
  uint8_t* buf = scratch.get(ab * size_t(n_tok));
  if (w.n_in * w.n_out < kMinParallelWeights) pool = nullptr;
  const int64_t ur = decode_unit_rows(kt, w), units = (w.n_out + ur - 1) / ur;
  if (n_tok == 1) {
    const void* act = prepare_act_row(kt, w, x, buf);
    run_chunked(pool, units, [&](int64_t u0, int64_t u1) { decode_units(kt, w, u0, u1, act, y); });
    return;
  }
  std::vector<const void*> acts(static_cast<size_t>(n_tok), nullptr);
  for (int64_t t = 0; t < n_tok; ++t) acts[size_t(t)] = prepare_act_row(kt, w, x + t * w.n_in, buf + size_t(t) * ab);
  const int64_t step = std::max<int64_t>(1, kDecodeRowsTile / ur);  // units of ur weight rows
  run_chunked(pool, units, [&](int64_t u0, int64_t u1) {
    for (int64_t b = u0; b < u1; b += step) {
      const int64_t e = std::min(u1, b + step);
      for (int64_t t = 0; t < n_tok; ++t) decode_units(kt, w, b, e, acts[size_t(t)], y + t * w.n_out);
    }
  });
}

// Prefill arithmetic for n_tok rows: the packed form's GEMM (a form with unpack_u8: below
// gemm_min_tokens rows only), the u8 GEMM from gemm_min_tokens rows on, else quantized rows through the type's dot kernels in row x token tiles. Each row's
// outputs depend on that row only, never on how many rows come with it (above gemm_min_tokens).
inline void matmul_prefill_rows(const KernelTable& kt, ThreadPool* pool, const MatmulWeight& w, const float* x,
                                int64_t n_tok, float* y, MatmulScratch& scratch, int64_t gemm_min_tokens) {
  const TypeKernels& k = kt.of(w.type);
  const DType act_type = k.vec_dot_type;
  const bool act_f32 = act_type == DType::F32;
  const PackedFormat& tpf = kt.packed_of(w.type);
  if (w.packed ? w.pf->prefill_gemm != nullptr : tpf.rows > 0 && tpf.prefill_gemm != nullptr) {
    matmul_packed_prefill(pool, w, w.packed ? *w.pf : tpf, x, n_tok, y, scratch);
    return;
  }
  if (w.packed && !((w.pf->unpack_u8 || w.pf->to_file_row) && gemm_u8_applies(kt, w, n_tok, gemm_min_tokens))) {
    matmul_packed_prefill(pool, w, *w.pf, x, n_tok, y, scratch);
    return;
  }
  if (gemm_u8_applies(kt, w, n_tok, gemm_min_tokens)) {
    matmul_gemm_u8(kt, pool, w, act_type, x, n_tok, y, scratch);
    return;
  }

  // 1. Quantize every activation row once: act row t at act + t * act_row_bytes.
  const size_t act_row_bytes = act_f32 ? size_t(w.n_in) * sizeof(float) : dtype_row_bytes(act_type, w.n_in);
  const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
  if (!act_f32) {
    uint8_t* q = scratch.get(act_row_bytes * size_t(n_tok));
    const FromFloatFn from_float = kt.of(act_type).from_float;
    auto quantize = [&](int64_t t0, int64_t t1, int) {
      for (int64_t t = t0; t < t1; ++t) from_float(x + t * w.n_in, q + size_t(t) * act_row_bytes, w.n_in);
    };
    if (pool) pool->parallel_for(n_tok, quantize);
    else quantize(0, n_tok, 0);
    act = q;
  }

  // 2. Threads take ranges of row tiles; a token tile (kept in L2) passes over each row tile (kept
  // in L1) before the next row tile is loaded.
  const int64_t row_tiles = (w.n_out + kMatmulRowTile - 1) / kMatmulRowTile;
  run_chunked(pool, row_tiles, [&](int64_t tile0, int64_t tile1) {
    for (int64_t t0 = 0; t0 < n_tok; t0 += kMatmulTokTile) {
      const int64_t t1 = std::min(n_tok, t0 + kMatmulTokTile);
      for (int64_t tile = tile0; tile < tile1; ++tile) {
        const int64_t r0 = tile * kMatmulRowTile;
        const int64_t nr = std::min(kMatmulRowTile, w.n_out - r0);
        for (int64_t t = t0; t < t1; ++t) dot_rows(k, w, r0, nr, act + size_t(t) * act_row_bytes, y + t * w.n_out + r0);
      }
    }
  });
}

}  // namespace detail

// x: [n_tok, n_in] floats, y: [n_tok, n_out] floats (must not alias x). pool may be null (one
// thread). Throws Error when the weight type has no kernel or shapes do not fit.
//
// Which arithmetic computes a row (the decode GEMV or a prefill GEMM: the same sums, rounded
// differently) is chosen by n_decode:
// - n_decode < 0 (by count): one row is decoded, several are prefilled.
// - n_decode >= 0 (by role): the first n_decode rows (tokens a model generated) are decoded and the
//   rest (prompt tokens) prefilled, however many there are of each. A row's outputs then depend on
//   its own role and values only, never on the other rows of the call: a request batched with
//   others, or with a prompt chunk, gets the numbers it gets alone (engine/batch_scheduler.hpp).
inline void matmul(const KernelTable& kt, ThreadPool* pool, const MatmulWeight& w, const float* x, int64_t n_tok,
                   float* y, MatmulScratch& scratch, int64_t n_decode = -1) {
  const TypeKernels& k = kt.of(w.type);
  const DType act_type = k.vec_dot_type;
  detail::check_matmul(k, w, act_type, act_type == DType::F32 || kt.of(act_type).from_float != nullptr);
  EDGELLM_CHECK(n_decode <= n_tok, "matmul: ", n_decode, " decode rows of ", n_tok);
  if (n_tok <= 0 || w.n_out == 0) return;
  if (n_decode < 0) {
    if (n_tok == 1) detail::matmul_decode_rows(kt, pool, w, x, 1, y, scratch);
    else detail::matmul_prefill_rows(kt, pool, w, x, n_tok, y, scratch, detail::kGemmMinTokens);
    return;
  }
  if (n_decode > 0) detail::matmul_decode_rows(kt, pool, w, x, n_decode, y, scratch);
  if (n_tok > n_decode)
    detail::matmul_prefill_rows(kt, pool, w, x + n_decode * w.n_in, n_tok - n_decode, y + n_decode * w.n_out, scratch, 1);
}

// One weight matrix and its output, for matmul_multi.
struct MatmulTask {
  const MatmulWeight* w;
  float* y;  // [n_tok, w->n_out]
};

namespace detail {
// Can one prepared activation row and one unit size serve both matrices in a decode step? Same row
// length, and either the same stored type unpacked, or packed forms that read the same activation
// form in groups of the same size (e.g. q4_Kx16 and q6_Kx16 of a Q4_K_M layer's Q/K/V).
inline bool decode_compatible(const MatmulWeight& a, const MatmulWeight& b) {
  if (a.n_in != b.n_in || (a.packed != nullptr) != (b.packed != nullptr)) return false;
  if (!a.packed) return a.type == b.type;
  return a.pf == b.pf || (a.pf->rows == b.pf->rows && a.pf->prepare_act == b.pf->prepare_act &&
                          a.pf->act_bytes == b.pf->act_bytes);
}
}  // namespace detail

// Several matrices applied to the same input x (Q/K/V, gate/up). Decode with matrices that share
// the activation form and unit size (detail::decode_compatible): the activation is prepared once and
// a single pass of the pool covers the rows of all of them (one hand-off instead of one per
// matrix). Otherwise one matmul() each. n_decode as for matmul().
inline void matmul_multi(const KernelTable& kt, ThreadPool* pool, const MatmulTask* tasks, int count, const float* x,
                         int64_t n_tok, MatmulScratch& scratch, int64_t n_decode = -1) {
  bool fuse = n_tok == 1 && n_decode != 0 && count > 1;
  for (int i = 1; i < count && fuse; ++i) fuse = detail::decode_compatible(*tasks[0].w, *tasks[i].w);
  if (!fuse) {
    for (int i = 0; i < count; ++i) matmul(kt, pool, *tasks[i].w, x, n_tok, tasks[i].y, scratch, n_decode);
    return;
  }
  const MatmulWeight& w0 = *tasks[0].w;
  const int64_t ur = detail::decode_unit_rows(kt, w0);
  int64_t units = 0, weights = 0;
  for (int i = 0; i < count; ++i) {
    const TypeKernels& k = kt.of(tasks[i].w->type);
    const DType act_type = k.vec_dot_type;
    detail::check_matmul(k, *tasks[i].w, act_type, act_type == DType::F32 || kt.of(act_type).from_float != nullptr);
    units += (tasks[i].w->n_out + ur - 1) / ur;
    weights += tasks[i].w->n_in * tasks[i].w->n_out;
  }
  const void* act = detail::prepare_act_row(kt, w0, x, scratch.get(detail::act_row_bytes(kt, w0)));
  if (weights < detail::kMinParallelWeights) pool = nullptr;
  detail::run_chunked(pool, units, [&](int64_t u0, int64_t u1) {
    int64_t base = 0;  // first unit of matrix i
    for (int i = 0; i < count && base < u1; ++i) {
      const MatmulWeight& w = *tasks[i].w;
      const int64_t n_units = (w.n_out + ur - 1) / ur;
      const int64_t b = std::max(u0, base) - base, e = std::min(u1, base + n_units) - base;
      if (b < e) detail::decode_units(kt, w, b, e, act, tasks[i].y);
      base += n_units;
    }
  });
}

// As above with a scratch buffer owned by the calling thread (thread_local, grows to the largest
// activation seen and is kept for the thread's lifetime).
inline void matmul(const KernelTable& kt, ThreadPool* pool, const MatmulWeight& w, const float* x, int64_t n_tok,
                   float* y) {
  thread_local MatmulScratch scratch;
  matmul(kt, pool, w, x, n_tok, y, scratch);
}

}  // namespace edgellm
