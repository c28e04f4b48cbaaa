// Quantizers of the i-quant and ternary weight formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
// IQ1_S, IQ1_M, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0), byte-identical to ggml's quantize_<type>: the same
// searches, the same float operation order, no FMA contraction (quant/exact_fp.hpp).
//
//   size_t quantize_<type>(src, dst, nrows, n_per_row, imatrix)
//
// quantizes nrows rows of n_per_row floats into dst (rows of blocks, back to back) and returns the
// bytes written. imatrix, when given, holds n_per_row importance weights (one per column, the same
// for every row; llama-quantize passes in_sum2 / counts of the imatrix file). IQ2_XXS, IQ2_XS and
// IQ1_S need it (Error otherwise, as ggml asserts); the others fall back to weights from the data.
//
// The lattice types search a codebook (quant/iq_tables.hpp) through a map from "level codes" (each
// weight's level 0..kMaxQ-1 packed 2 or 3 bits a weight) to grid indexes; a code that is not a grid
// point maps to the list of its nearest grid points (all points at the nwant smallest squared
// distances, in (distance, index) order, as ggml's iq2xs_init_impl / iq3xs_init_impl build them).
// The maps are built once per process on first use (function-local statics: thread-safe, freed at
// exit); every quantizer is re-entrant, rows can be quantized from several threads at once.
#pragma once
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "edgellm/config.hpp"
#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/exact_fp.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/iq_tables.hpp"
#include "edgellm/quant/ref_kquants.hpp"

EDGELLM_EXACT_FP_BEGIN
namespace edgellm {
namespace detail {

// Scale search for symmetric groups when an importance is given (ggml's make_qp_quants), shared
// by the i-quants here and the weighted K-quants (quant/quantize_weighted.hpp): x >= 0, L in
// [0, nmax]; tries nmax + 0.1 * is for is in -4..4 by weighted squared error, then up to 5 passes
// moving single L values while that raises sum(q*x*L)^2 / sum(q*L^2). Returns the scale.
inline float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* qw) {
  EDGELLM_EXACT_FP_SCOPE
  float max = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = nmax / max;
  for (int i = 0; i < n; ++i) L[i] = uint8_t(nearest_int(iscale * x[i]));
  float scale = 1 / iscale;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * L[i];
    best_mse += qw[i] * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * is + nmax) / max;
    const float scale_is = 1 / iscale_is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::min(nmax, nearest_int(iscale_is * x[i]));
      const float diff = x[i] - scale_is * l;
      mse += qw[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_is;
    }
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, nearest_int(iscale * x[i]));
    L[i] = uint8_t(l);
    const float w = qw[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = qw[i];
      float slx = sumlx - w * x[i] * L[i];
      float sl2 = suml2 - w * L[i] * L[i];
      if (slx > 0 && sl2 > 0) {
        const int new_l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = uint8_t(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

namespace iq {

// Groups whose largest magnitude is below these are stored as zeros (ggml's thresholds per type).
constexpr float kEpsIq3xxs = 1e-8f;
constexpr float kEpsIq2s = 1e-8f;
constexpr float kEpsIq1m = 1e-7f;
constexpr float kEpsIq1s = 1e-12f;

inline void check_shape(const char* type, int64_t nrows, int64_t n_per_row, int64_t block) {
  EDGELLM_CHECK(nrows >= 0 && n_per_row >= 0 && n_per_row % block == 0, "quantize ", type, ": row length ", n_per_row,
                " is not a multiple of the block size ", block);
}
inline void require_imatrix(const char* type, const float* imatrix) {
  EDGELLM_CHECK(imatrix != nullptr, "quantize ", type, ": this type needs an importance matrix (imatrix)");
}

// ---------------------------------------------------------------------------------------------
// Grid maps.

struct GridMap {
  int dims = 0;                   // weights per grid point (8 or 4)
  int bits = 0;                   // bits per weight in a level code (2 or 3)
  std::vector<int8_t> points;     // point j's weights as 2 * level + 1, dims per point
  std::vector<int32_t> map;       // level code -> grid index, or -(1 + offset into neighbours)
  std::vector<uint16_t> neighbours;  // per off-grid code: count, then the grid indexes

  const int8_t* point(int j) const { return points.data() + size_t(j) * size_t(dims); }
  const uint16_t* neighbours_of(int32_t entry) const { return neighbours.data() + (-entry - 1); }
  int size() const { return int(points.size()) / dims; }
};

// level_of maps a grid byte (as stored in the codebook) to its level.
template <class Grid, class LevelOf>
GridMap build_grid_map(const Grid& grid, int dims, int bits, int map_size, int nwant, LevelOf level_of) {
  GridMap g;
  g.dims = dims;
  g.bits = bits;
  const int n = int(grid.size());
  g.points.resize(size_t(n) * size_t(dims));
  g.map.assign(size_t(map_size), -1);
  for (int j = 0; j < n; ++j) {
    uint32_t code = 0;
    for (int i = 0; i < dims; ++i) {
      const int l = level_of(uint8_t(uint64_t(grid[size_t(j)]) >> (8 * i)));
      g.points[size_t(j) * dims + i] = int8_t(2 * l + 1);
      code |= uint32_t(l) << (bits * i);
    }
    EDGELLM_CHECK(int(code) < map_size, "i-quant grid: point ", j, " has level code ", code, " beyond the map");
    g.map[code] = j;
  }
  const int level_mask = (1 << bits) - 1;
  std::vector<int> d2(static_cast<size_t>(n));
  int8_t pos[8];
  for (int code = 0; code < map_size; ++code) {
    if (g.map[code] >= 0) continue;
    for (int i = 0; i < dims; ++i) pos[i] = int8_t(2 * ((code >> (bits * i)) & level_mask) + 1);
    for (int j = 0; j < n; ++j) {
      const int8_t* pg = g.point(j);
      int s = 0;
      for (int i = 0; i < dims; ++i) s += (pg[i] - pos[i]) * (pg[i] - pos[i]);
      d2[j] = s;
    }
    // The nwant smallest distinct distances; the list is every point at one of them, by distance
    // then index (ggml sorts (distance, index) pairs and cuts after the nwant-th distinct distance).
    int levels[4];
    int nlev = 0;
    for (; nlev < nwant; ++nlev) {
      int next = INT32_MAX;
      for (int j = 0; j < n; ++j)
        if (d2[j] < next && (nlev == 0 || d2[j] > levels[nlev - 1])) next = d2[j];
      if (next == INT32_MAX) break;
      levels[nlev] = next;
    }
    const size_t start = g.neighbours.size();
    g.map[code] = -int32_t(start + 1);
    g.neighbours.push_back(0);
    for (int k = 0; k < nlev; ++k)
      for (int j = 0; j < n; ++j)
        if (d2[j] == levels[k]) g.neighbours.push_back(uint16_t(j));
    g.neighbours[start] = uint16_t(g.neighbours.size() - start - 1);
  }
  return g;
}

inline int level_iq2(uint8_t b) { return b == 0x08 ? 0 : b == 0x19 ? 1 : 2; }

inline const GridMap& grid_iq2xxs() {
  static const GridMap g = build_grid_map(iq2xxs_grid, 8, 2, 43692, 2, level_iq2);
  return g;
}
inline const GridMap& grid_iq2xs() {
  static const GridMap g = build_grid_map(iq2xs_grid, 8, 2, 43692, 2, level_iq2);
  return g;
}
inline const GridMap& grid_iq2s() {
  static const GridMap g = build_grid_map(iq2s_grid, 8, 2, 43692, 1, level_iq2);
  return g;
}
// IQ1_S / IQ1_M: weights -1, 0, +1 are levels 0, 1, 2.
inline const GridMap& grid_iq1s() {
  static const GridMap g = build_grid_map(iq1s_grid, 8, 2, 43692, 3, [](uint8_t b) { return int(int8_t(b)) + 1; });
  return g;
}
inline const GridMap& grid_iq3xxs() {
  static const GridMap g = build_grid_map(iq3xxs_grid, 4, 3, 4096, 2, [](uint8_t b) { return b == 0x3e ? 7 : b / 8; });
  return g;
}
inline const GridMap& grid_iq3s() {
  static const GridMap g = build_grid_map(iq3s_grid, 4, 3, 4096, 3, [](uint8_t b) { return (b - 1) / 2; });
  return g;
}

// The grid point nearest x / scale in weighted squared distance among the neighbour list nb (first
// on ties), the point's weights taken as they are or (xg non-null: IQ1) mapped through xg, the
// values of levels 0, 1, 2; L = its levels. Returns its index.
inline int best_neighbour(const GridMap& g, const uint16_t* nb, const float* xval, const float* weight, float scale,
                          int8_t* L, const float* xg = nullptr) {
  EDGELLM_EXACT_FP_SCOPE
  const int num = nb[0];
  float best_d2 = FLT_MAX;
  int grid_index = -1;
  for (int j = 1; j <= num; ++j) {
    const int8_t* pg = g.point(nb[j]);
    float d2 = 0;
    for (int i = 0; i < g.dims; ++i) {
      const float q = xg ? xg[(pg[i] - 1) / 2] : float(pg[i]);
      const float diff = scale * q - xval[i];
      d2 += weight[i] * diff * diff;
    }
    if (d2 < best_d2) {
      best_d2 = d2;
      grid_index = nb[j];
    }
  }
  EDGELLM_CHECK(grid_index >= 0, "i-quant: no grid point found (non-finite input?)");
  const int8_t* pg = g.point(grid_index);
  for (int i = 0; i < g.dims; ++i) L[i] = int8_t((pg[i] - 1) / 2);
  return grid_index;
}

// The level code of dims levels.
inline int level_code(const GridMap& g, const int8_t* L) {
  int u = 0;
  for (int i = 0; i < g.dims; ++i) u |= L[i] << (g.bits * i);
  return u;
}

// Levels of x (>= 0) at inverse scale id, clamped to [0, kmax - 1], as their code.
inline int round_levels(const GridMap& g, const float* xval, float id, int kmax, int8_t* L) {
  EDGELLM_EXACT_FP_SCOPE
  for (int i = 0; i < g.dims; ++i) {
    const int l = nearest_int(0.5f * (id * xval[i] - 1));
    L[i] = int8_t(std::max(0, std::min(kmax - 1, l)));
  }
  return level_code(g, L);
}

// Puts L on the grid: keeps it when its code is a point, else the best neighbour at scale.
// Returns whether it was already on the grid.
inline bool snap_to_grid(const GridMap& g, int code, const float* xval, const float* waux, float scale, int8_t* L) {
  const int32_t e = g.map[code];
  if (e >= 0) return true;
  best_neighbour(g, g.neighbours_of(e), xval, waux, scale, L);
  return false;
}

inline int grid_index_of(const GridMap& g, const int8_t* L) {
  const int32_t e = g.map[level_code(g, L)];
  EDGELLM_CHECK(e >= 0, "i-quant: levels not on the grid");
  return e;
}

// sum w x q and sum w q^2 over n weights with q = 2 L + 1.
inline void odd_level_sums(int n, const float* weight, const float* xval, const int8_t* L, float* sumqx, float* sumq2) {
  EDGELLM_EXACT_FP_SCOPE
  float sx = 0, s2 = 0;
  for (int i = 0; i < n; ++i) {
    const float w = weight[i];
    const float q = 2 * L[i] + 1;
    sx += w * xval[i] * q;
    s2 += w * q * q;
  }
  *sumqx = sx;
  *sumq2 = s2;
}

// xval = |xb| over 8 weights; returns the 8 sign bits.
inline uint8_t plain_signs8(const float* xb, float* xval) {
  uint8_t s = 0;
  for (int i = 0; i < 8; ++i) {
    if (xb[i] >= 0) {
      xval[i] = xb[i];
    } else {
      xval[i] = -xb[i];
      s |= uint8_t(1 << i);
    }
  }
  return s;
}

// As plain_signs8, except that an odd number of negatives leaves the least important one
// (smallest w x^2) negative so the stored 7 sign bits imply the 8th. Returns the 7 bits.
inline uint8_t even_signs8(const float* xb, const float* weight, float* xval) {
  EDGELLM_EXACT_FP_SCOPE
  uint8_t s = plain_signs8(xb, xval);
  int nflip = 0;
  for (int i = 0; i < 8; ++i) nflip += (s >> i) & 1;
  if (nflip % 2) {
    int imin = 0;
    float min = weight[0] * xb[0] * xb[0];
    for (int i = 1; i < 8; ++i) {
      const float ax = weight[i] * xb[i] * xb[i];
      if (ax < min) {
        min = ax;
        imin = i;
      }
    }
    xval[imin] = -xval[imin];
    s ^= uint8_t(1 << imin);
  }
  return uint8_t(s & 127);
}

// One group of n weights (n / 8 sign bytes): waux = sqrt(weight), xval = |x| (even_signs8 when
// even, else plain_signs8) and signs. Returns the largest xval.
inline float group_magnitudes(const float* xb, const float* weight, int n, bool even, float* waux, float* xval,
                              uint8_t* signs) {
  for (int i = 0; i < n; ++i) waux[i] = std::sqrt(weight[i]);
  for (int k = 0; k < n / 8; ++k)
    signs[k] = even ? even_signs8(xb + 8 * k, weight + 8 * k, xval + 8 * k) : plain_signs8(xb + 8 * k, xval + 8 * k);
  float max = xval[0];
  for (int i = 1; i < n; ++i) max = std::max(max, xval[i]);
  return max;
}

// A negative scale (possible only through a parity-flipped weight) is made positive by inverting
// the nsigns sign patterns (mask: their stored bits), as ggml does.
inline float positive_scale(float scale, uint8_t* signs, int nsigns, uint8_t mask) {
  if (scale >= 0) return scale;
  for (int k = 0; k < nsigns; ++k) signs[k] = uint8_t(~signs[k] & mask);
  return -scale;
}

inline float sum_squares(const float* x, int n) {
  EDGELLM_EXACT_FP_SCOPE
  float s = 0;
  for (int i = 0; i < n; ++i) s += x[i] * x[i];
  return s;
}

// The variance-like term of a super-block's importance weights: factor * sum(x^2) / QK_K (ggml
// uses factor 2, or 1 for IQ2_XXS and IQ2_XS).
inline float super_block_sigma2(const float* xbl, float factor) {
  EDGELLM_EXACT_FP_SCOPE
  return factor * sum_squares(xbl, QK_K) / QK_K;
}

// weight[i] = qw[i] * sqrt(sigma2 + x^2) (the importance-weighted form every i-quant uses).
inline void imatrix_weights(const float* qw, const float* xb, float sigma2, int n, float* weight) {
  EDGELLM_EXACT_FP_SCOPE
  for (int i = 0; i < n; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
}
// With an imatrix (qw not null) as above; without, weight = x^2.
inline void group_weights(const float* qw, const float* xb, float sigma2, int n, float* weight) {
  EDGELLM_EXACT_FP_SCOPE
  if (qw) {
    imatrix_weights(qw, xb, sigma2, n, weight);
  } else {
    for (int i = 0; i < n; ++i) weight[i] = xb[i] * xb[i];
  }
}

// The scale search of IQ2_XS / IQ2_S / IQ3_XXS / IQ3_S over one group of n weights (xval >= 0 up to
// the parity sign, max their largest): 2 * nis + 1 trial scales around max / (2 kmax - 1), each
// rounding every point to levels and snapping it to the grid; the best weighted least-squares fit
// wins; then, if a point of it was off the grid (every point when redo_all: IQ3_S), the points are
// rounded again at the fitted scale and the scale refitted. L = the levels. Returns the scale.
inline float grid_scale_search(const GridMap& g, int n, int kmax, int nis, float step, bool redo_all, float max,
                               const float* xval, const float* weight, const float* waux, int8_t* L) {
  EDGELLM_EXACT_FP_SCOPE
  const int npt = n / g.dims;
  int8_t Laux[32];
  bool on_grid[8], on_grid_aux[8];
  std::memset(L, 0, size_t(n));
  float best = 0;
  float scale = max / (2 * kmax - 1);
  for (int k = 0; k < npt; ++k) on_grid[k] = !redo_all;
  for (int is = -nis; is <= nis; ++is) {
    const float id = (2 * kmax - 1 + is * step) / max;
    const float this_scale = 1 / id;
    for (int k = 0; k < npt; ++k) {
      const int off = g.dims * k;
      const int u = round_levels(g, xval + off, id, kmax, Laux + off);
      on_grid_aux[k] = snap_to_grid(g, u, xval + off, waux + off, this_scale, Laux + off);
    }
    float sumqx, sumq2;
    odd_level_sums(n, weight, xval, Laux, &sumqx, &sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::memcpy(L, Laux, size_t(n));
      std::memcpy(on_grid, on_grid_aux, sizeof(bool) * size_t(npt));
    }
  }
  int n_off = 0;
  for (int k = 0; k < npt; ++k)
    if (!on_grid[k]) ++n_off;
  if (n_off > 0 && scale > 0) {
    const float id = 1 / scale;
    for (int k = 0; k < npt; ++k) {
      if (on_grid[k] && !redo_all) continue;
      const int off = g.dims * k;
      const int u = round_levels(g, xval + off, id, kmax, L + off);
      snap_to_grid(g, u, xval + off, waux + off, scale, L + off);
    }
    float sumqx, sumq2;
    odd_level_sums(n, weight, xval, L, &sumqx, &sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  return scale;
}

// 4-bit super-block scale of a group scale: nearest_int((scale / d - 1) / 2) in [0, 15].
inline int odd_scale4(float id, float scale, int maxv) {
  EDGELLM_EXACT_FP_SCOPE
  return std::max(0, std::min(maxv, nearest_int(0.5f * (id * scale - 1))));
}

// ---------------------------------------------------------------------------------------------
// IQ2_XXS, IQ3_XXS (8- / 4-weight points of magnitudes 1, 3, 5 / 1 ... 15 times the scale), IQ2_XS, IQ2_S.

// IQ2_XXS: the 4 points of a group of 32 rounded at inverse scale id and snapped to the grid at
// scale (L = their levels), and the group's sums for the optimal scale.
inline void iq2_xxs_points(const GridMap& g, const float* xval, const float* weight, const float* waux, float id,
                           float scale, int8_t* L, float* sumqx, float* sumq2) {
  constexpr int kMaxQ = 3;
  for (int k = 0; k < 4; ++k) {
    const int u = round_levels(g, xval + 8 * k, id, kMaxQ, L + 8 * k);
    snap_to_grid(g, u, xval + 8 * k, waux + 8 * k, scale, L + 8 * k);
  }
  odd_level_sums(32, weight, xval, L, sumqx, sumq2);
}

// IQ2_XXS's search over one group of 32 (xval >= 0 up to the parity sign): make_qp_quants' scale,
// 13 trial scales around it, each snapping the 4 points to the grid, then the points rounded again
// at the best scale and the scale refitted. L = the levels; false when the group stays zero.
inline bool iq2_xxs_search(const GridMap& g, const float* xval, const float* weight, const float* waux, int8_t* L,
                           float* scale_out) {
  EDGELLM_EXACT_FP_SCOPE
  constexpr int kMaxQ = 3;
  int8_t Laux[32];
  float scale = make_qp_quants(32, kMaxQ + 1, xval, reinterpret_cast<uint8_t*>(L), weight);
  const float eff_max = scale * kMaxQ;
  if (eff_max <= 0) return false;
  float best = 0;
  for (int is = -6; is <= 6; ++is) {
    const float id = (2 * kMaxQ - 1 + is * 0.1f) / eff_max;
    float sumqx, sumq2;
    iq2_xxs_points(g, xval, weight, waux, id, 1 / id, Laux, &sumqx, &sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::memcpy(L, Laux, 32);
    }
  }
  if (scale > 0) {
    float sumqx, sumq2;
    iq2_xxs_points(g, xval, weight, waux, 1 / scale, scale, L, &sumqx, &sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  *scale_out = scale;
  return true;
}

// IQ2_XXS (8-weight points) and IQ3_XXS (4-weight points, kIq3): per 32 weights 4 even sign
// patterns, one grid-index byte per point and a word of the 4 x 7 sign bits with the 4-bit group
// scale on top. IQ2_XXS interleaves each group's 4 index bytes and its word; IQ3_XXS stores all
// index bytes, then all words.
template <bool kIq3, class Block>
inline void xxs_row(const float* x, Block* y, int64_t n, const float* qw_row) {
  EDGELLM_EXACT_FP_SCOPE
  const GridMap& g = kIq3 ? grid_iq3xxs() : grid_iq2xxs();
  constexpr int kPoints = kIq3 ? 8 : 4;  // grid points per 32 weights
  float scales[QK_K / 32], weight[32], xval[32], waux[32];
  int8_t L[32];
  uint8_t block_signs[4];
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    uint8_t index[QK_K / 32][kPoints] = {};
    uint32_t words[QK_K / 32] = {};
    y[ibl].d = fp32_to_fp16(0.f);
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = super_block_sigma2(xbl, kIq3 ? 2.f : 1.f);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const float* xb = xbl + 32 * ib;
      group_weights(qw_row ? qw_row + QK_K * ibl + 32 * ib : nullptr, xb, sigma2, 32, weight);
      const float max = group_magnitudes(xb, weight, 32, true, waux, xval, block_signs);
      float scale = 0;
      bool zero = max < (kIq3 ? kEpsIq3xxs : kGroupMaxEps);
      if (!zero && kIq3) scale = grid_scale_search(g, 32, 8, 15, 0.2f, false, max, xval, weight, waux, L);
      if (!zero && !kIq3) zero = !iq2_xxs_search(g, xval, weight, waux, L, &scale);
      if (zero) {
        scales[ib] = 0;
        continue;
      }
      scale = positive_scale(scale, block_signs, 4, 127);
      for (int k = 0; k < kPoints; ++k) index[ib][k] = uint8_t(grid_index_of(g, L + (32 / kPoints) * k));
      for (int k = 0; k < 4; ++k) words[ib] |= uint32_t(block_signs[k]) << (7 * k);
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }
    if (!max_scale) {
      std::memset(y[ibl].qs, 0, sizeof(y[ibl].qs));
      continue;
    }
    const float d = max_scale / 31;
    y[ibl].d = fp32_to_fp16(kIq3 ? d * 1.0125f : d);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / 32; ++ib) words[ib] |= uint32_t(odd_scale4(id, scales[ib], 15)) << 28;
    auto* qs = reinterpret_cast<uint8_t*>(y[ibl].qs);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const size_t at_index = kIq3 ? size_t(kPoints * ib) : size_t(8 * ib);
      const size_t at_word = kIq3 ? size_t(QK_K / 4 + 4 * ib) : size_t(8 * ib + 4);
      std::memcpy(qs + at_index, index[ib], kPoints);
      std::memcpy(qs + at_word, &words[ib], 4);
    }
  }
}
inline void iq2_xxs_row(const float* x, block_iq2_xxs* y, int64_t n, const float* qw) { xxs_row<false>(x, y, n, qw); }
inline void iq3_xxs_row(const float* x, block_iq3_xxs* y, int64_t n, const float* qw) { xxs_row<true>(x, y, n, qw); }

// IQ2_XS (even_signs, 7 sign bits next to a 9-bit index) and IQ2_S (all 8 sign bits stored,
// 10-bit indexes) share everything but the weights without imatrix and the packing.
template <bool kIq2s>
inline void iq2_16_row(const float* x, void* vy, int64_t n, const float* qw_row) {
  EDGELLM_EXACT_FP_SCOPE
  const GridMap& g = kIq2s ? grid_iq2s() : grid_iq2xs();
  constexpr int kMaxQ = 3;
  float scales[QK_K / 16], weight[16], xval[16], waux[16];
  int8_t L[16];
  uint8_t block_signs[2];
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    block_iq2_xs* yx = kIq2s ? nullptr : static_cast<block_iq2_xs*>(vy) + ibl;
    block_iq2_s* ys = kIq2s ? static_cast<block_iq2_s*>(vy) + ibl : nullptr;
    uint16_t q2[2 * (QK_K / 16)] = {};
    if (kIq2s) {
      std::memset(ys, 0, sizeof(*ys));
      ys->d = fp32_to_fp16(0.f);
    } else {
      yx->d = fp32_to_fp16(0.f);
      std::memset(yx->scales, 0, sizeof(yx->scales));
    }
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = super_block_sigma2(xbl, kIq2s ? 2.f : 1.f);
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      const float* xb = xbl + 16 * ib;
      if (qw_row) {
        imatrix_weights(qw_row + QK_K * ibl + 16 * ib, xb, sigma2, 16, weight);
      } else {
        for (int i = 0; i < 16; ++i) weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
      }
      const float max = group_magnitudes(xb, weight, 16, !kIq2s, waux, xval, block_signs);
      if (max < (kIq2s ? kEpsIq2s : kGroupMaxEps)) {
        scales[ib] = 0;
        continue;
      }
      float scale = grid_scale_search(g, 16, kMaxQ, 9, 0.1f, false, max, xval, weight, waux, L);
      scale = positive_scale(scale, block_signs, 2, kIq2s ? 255 : 127);
      for (int k = 0; k < 2; ++k) {
        const int gi = grid_index_of(g, L + 8 * k);
        const int i8 = 2 * ib + k;
        if (kIq2s) {
          ys->qs[i8] = uint8_t(gi & 255);
          ys->qh[i8 / 4] |= uint8_t((gi >> 8) << 2 * (i8 % 4));
          ys->qs[QK_K / 8 + i8] = block_signs[k];
        } else {
          q2[i8] = uint16_t(gi | (block_signs[k] << 9));
        }
      }
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }
    if (!max_scale) {
      if (!kIq2s) std::memset(yx->qs, 0, sizeof(yx->qs));
      continue;
    }
    const float d = max_scale / 31;
    uint8_t* sc = kIq2s ? ys->scales : yx->scales;
    if (kIq2s) {
      ys->d = fp32_to_fp16(d * 0.9875f);
    } else {
      yx->d = fp32_to_fp16(d);
    }
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      const int l = odd_scale4(id, scales[ib], 15);
      if (ib % 2 == 0) {
        sc[ib / 2] = uint8_t(l);
      } else {
        sc[ib / 2] |= uint8_t(l << 4);
      }
    }
    if (!kIq2s) std::memcpy(yx->qs, q2, sizeof(q2));
  }
}

// ---------------------------------------------------------------------------------------------
// IQ3_S (4-weight points of odd magnitudes 1 ... 15 times the scale).

inline void iq3_s_row(const float* x, block_iq3_s* y, int64_t n, const float* qw_row) {
  EDGELLM_EXACT_FP_SCOPE
  const GridMap& g = grid_iq3s();
  constexpr int kMaxQ = 8, kBlock = 32, bs4 = kBlock / 4, bs8 = kBlock / 8;
  float scales[QK_K / kBlock], weight[kBlock], xval[kBlock], waux[kBlock];
  int8_t L[kBlock];
  uint8_t block_signs[bs8];
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    std::memset(&y[ibl], 0, sizeof(block_iq3_s));
    y[ibl].d = fp32_to_fp16(0.f);
    uint8_t* qs = y[ibl].qs;
    uint8_t* signs = y[ibl].signs;
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = super_block_sigma2(xbl, 2.f);
    for (int ib = 0; ib < QK_K / kBlock; ++ib) {
      const float* xb = xbl + kBlock * ib;
      group_weights(qw_row ? qw_row + QK_K * ibl + kBlock * ib : nullptr, xb, sigma2, kBlock, weight);
      const float max = group_magnitudes(xb, weight, kBlock, false, waux, xval, block_signs);
      if (!max) {
        scales[ib] = 0;
        continue;
      }
      float scale = grid_scale_search(g, kBlock, kMaxQ, 9, 0.2f, true, max, xval, weight, waux, L);
      scale = positive_scale(scale, block_signs, bs8, 255);
      for (int k = 0; k < bs4; ++k) {
        const int gi = grid_index_of(g, L + 4 * k);
        qs[k] = uint8_t(gi & 255);
        y[ibl].qh[(ib * bs4 + k) / 8] |= uint8_t((gi >> 8) << ((ib * bs4 + k) % 8));
      }
      qs += bs4;
      for (int k = 0; k < bs8; ++k) signs[k] = block_signs[k];
      signs += bs8;
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }
    if (!max_scale) continue;
    const float d = max_scale / 31;
    y[ibl].d = fp32_to_fp16(d * 1.033f);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / kBlock; ib += 2) {
      const int l1 = odd_scale4(id, scales[ib + 0], 15);
      const int l2 = odd_scale4(id, scales[ib + 1], 15);
      y[ibl].scales[ib / 2] = uint8_t(l1 | (l2 << 4));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// IQ1_S, IQ1_M (8-weight ternary points, shifted by +-delta).

// x sorted ascending with its positions (ties keep their order: glibc's qsort, which ggml calls,
// is a stable merge sort for arrays this small).
struct SortedX {
  float x;
  int i;
};
inline void sort_block(const float* xb, int n, SortedX* out) {
  for (int j = 0; j < n; ++j) out[j] = {xb[j], j};
  std::stable_sort(out, out + n, [](const SortedX& a, const SortedX& b) { return a.x < b.x; });
}

// The grid points of n / 8 groups of levels L; off-grid ones replaced by the best neighbour with
// the shifted values xx(k) of group k. Returns whether all were on the grid.
template <class ShiftOf>
inline bool iq1_points(const GridMap& g, int n, const float* xb, const float* weight, float scale, ShiftOf xx_of,
                       int8_t* L, uint16_t* index) {
  bool all_on_grid = true;
  for (int k = 0; k < n / 8; ++k) {
    const int u = level_code(g, L + 8 * k);
    int gi = g.map[u];
    if (gi < 0) {
      all_on_grid = false;
      gi = best_neighbour(g, g.neighbours_of(gi), xb + 8 * k, weight + 8 * k, scale, L + 8 * k, xx_of(k));
    }
    index[k] = uint16_t(gi);
  }
  return all_on_grid;
}

// Refit of the scale to the chosen points (only when one was off the grid).
template <class ShiftOf>
inline float iq1_refit(const GridMap& g, int n, const float* xb, const float* weight, const uint16_t* index,
                       ShiftOf xx_of, float scale) {
  EDGELLM_EXACT_FP_SCOPE
  float sumqx = 0, sumq2 = 0;
  for (int k = 0; k < n / 8; ++k) {
    const float* xx = xx_of(k);
    const int8_t* pg = g.point(index[k]);
    for (int j = 0; j < 8; ++j) {
      const float w = weight[8 * k + j];
      const float q = xx[(pg[j] - 1) / 2];
      sumqx += w * q * xb[8 * k + j];
      sumq2 += w * q * q;
    }
  }
  return sumqx > 0 && sumq2 > 0 ? sumqx / sumq2 : scale;
}

// Levels 0 / 1 / 2 for the sorted weights below i1 / from i1 below i2 / from i2 on; a negative
// scale is made positive by mirroring the levels. Returns whether it was mirrored.
inline bool levels_from_split(const SortedX* sorted, int n, int i1, int i2, float* scale, int8_t* L) {
  for (int j = 0; j < i1; ++j) L[sorted[j].i] = 0;
  for (int j = i1; j < i2; ++j) L[sorted[j].i] = 1;
  for (int j = i2; j < n; ++j) L[sorted[j].i] = 2;
  if (*scale >= 0) return false;
  for (int j = 0; j < n; ++j) L[j] = int8_t(2 - L[j]);
  *scale = -*scale;
  return true;
}

// A group's weights, largest |x| and sorted values; false (nothing sorted) when that max is below eps.
inline bool iq1_group_setup(const float* qw, const float* xb, float sigma2, int n, float eps, float* weight, float* max,
                            SortedX* sorted) {
  group_weights(qw, xb, sigma2, n, weight);
  float m = std::fabs(xb[0]);
  for (int i = 1; i < n; ++i) m = std::max(m, std::fabs(xb[i]));
  *max = m;
  if (m < eps) return false;
  sort_block(xb, n, sorted);
  return true;
}

// The best split so far of an IQ1 group search: a candidate (sum w x q, sum w q^2) replaces it
// when its score sumqx^2 / sumq2 is higher (the first one on ties).
struct Iq1Split {
  float score = -FLT_MAX, scale = 0;
  int i1 = -1, i2 = -1, shift = 0;
  void consider(float sumqx, float sumq2, int c1, int c2, int sh) {
    EDGELLM_EXACT_FP_SCOPE
    if (sumq2 > 0 && sumqx * sumqx > score * sumq2) {
      scale = sumqx / sumq2;
      score = scale * sumqx;
      i1 = c1;
      i2 = c2;
      shift = sh;
    }
  }
};

// The values of levels 0, 1, 2 shifted by +delta (p) and by -delta (m).
struct Iq1ShiftedValues {
  float p[3], m[3];
  explicit Iq1ShiftedValues(float delta) : p{-1 + delta, delta, 1 + delta}, m{-1 - delta, -delta, 1 - delta} {}
};

// The group loop iq1_s_row and iq1_m_row share, over one super-block xbl (importance weights qw or
// null): for each group of kBlock weights the weights and sort (iq1_group_setup), the split
// search(xb, weight, sorted, &best) (best.scale starts at the group's max |x|), the levels
// (mirror(shift) when the scale was negative), and the grid points (refit when off the grid) with
// the shift values values_of(shift, k) of each 8 weights; store(ib, index) records a group that
// found a split. scales / shifts: per group (0 / no_shift where none was found). Returns the
// largest scale.
template <int kBlock, class Search, class Mirror, class ValuesOf, class Store>
inline float iq1_super_block(const float* xbl, const float* qw, float sigma2, float eps,
                             int8_t no_shift, float* scales, int8_t* shifts, Search search, Mirror mirror,
                             ValuesOf values_of, Store store) {
  EDGELLM_EXACT_FP_SCOPE
  const GridMap& g = grid_iq1s();
  float weight[kBlock];
  int8_t L[kBlock];
  uint16_t index[kBlock / 8];
  SortedX sorted[kBlock];
  float max_scale = 0;
  for (int ib = 0; ib < QK_K / kBlock; ++ib) {
    const float* xb = xbl + kBlock * ib;
    scales[ib] = 0;
    shifts[ib] = no_shift;
    Iq1Split best;
    if (!iq1_group_setup(qw ? qw + kBlock * ib : nullptr, xb, sigma2, kBlock, eps, weight, &best.scale, sorted)) continue;
    search(xb, weight, sorted, &best);
    if (best.i1 < 0 || best.i2 < 0) continue;
    float scale = best.scale;
    int shift = best.shift;
    if (levels_from_split(sorted, kBlock, best.i1, best.i2, &scale, L)) shift = mirror(shift);
    auto xx_of = [&](int k) { return values_of(shift, k); };
    if (!iq1_points(g, kBlock, xb, weight, scale, xx_of, L, index))
      scale = iq1_refit(g, kBlock, xb, weight, index, xx_of, scale);
    store(ib, index);
    scales[ib] = scale;
    shifts[ib] = int8_t(shift);
    max_scale = std::max(max_scale, scale);
  }
  return max_scale;
}

inline void iq1_s_row(const float* x, block_iq1_s* y, int64_t n, const float* qw_row) {
  EDGELLM_EXACT_FP_SCOPE
  constexpr int kBlock = 32;
  const Iq1ShiftedValues v(IQ1S_DELTA);
  const float *x_p = v.p, *x_m = v.m;
  float scales[QK_K / kBlock];
  int8_t shifts[QK_K / kBlock];
  // Exhaustive search of the two boundaries splitting the sorted weights into levels -1, 0, +1
  // (shifted by +delta or -delta), from prefix sums of w x and w.
  auto search = [&](const float* xb, const float* weight, const SortedX* sorted, Iq1Split* best) {
    float sumx[kBlock + 1], sumw[kBlock + 1];
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < kBlock; ++j) {
      const int i = sorted[j].i;
      sumx[j + 1] = sumx[j] + weight[i] * xb[i];
      sumw[j + 1] = sumw[j] + weight[i];
    }
    for (int i1 = 0; i1 <= kBlock; ++i1) {
      for (int i2 = i1; i2 <= kBlock; ++i2) {
        for (int sh = 1; sh >= -1; sh -= 2) {
          const float* lv = sh == 1 ? x_p : x_m;
          const float sumqx = (sumx[i1] - sumx[0]) * lv[0] + (sumx[i2] - sumx[i1]) * lv[1] + (sumx[kBlock] - sumx[i2]) * lv[2];
          const float sumq2 = (sumw[i1] - sumw[0]) * lv[0] * lv[0] + (sumw[i2] - sumw[i1]) * lv[1] * lv[1] +
                              (sumw[kBlock] - sumw[i2]) * lv[2] * lv[2];
          best->consider(sumqx, sumq2, i1, i2, sh);
        }
      }
    }
  };
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    block_iq1_s& b = y[ibl];
    b.d = fp32_to_fp16(0.f);
    std::memset(b.qs, 0, sizeof(b.qs));
    std::memset(b.qh, 0, sizeof(b.qh));
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = super_block_sigma2(xbl, 2.f);
    const float max_scale = iq1_super_block<kBlock>(
        xbl, qw_row + QK_K * ibl, sigma2, kEpsIq1s, int8_t(1), scales, shifts, search, [](int sh) { return -sh; },
        [&](int sh, int) { return sh == 1 ? x_p : x_m; },
        [&](int ib, const uint16_t* index) {
          uint16_t h = 0;
          for (int k = 0; k < kBlock / 8; ++k) {
            b.qs[(kBlock / 8) * ib + k] = uint8_t(index[k] & 255);
            h |= uint16_t((index[k] >> 8) << 3 * k);
          }
          b.qh[ib] = h;
        });
    if (!max_scale) continue;
    const float d = max_scale / 15;
    b.d = fp32_to_fp16(d * 1.125f);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / kBlock; ++ib) {
      int l = odd_scale4(id, scales[ib], 7);
      if (shifts[ib] == -1) l |= 8;
      b.qh[ib] |= uint16_t(l << 12);
    }
  }
}

inline void iq1_m_row(const float* x, block_iq1_m* y, int64_t n, const float* qw_row) {
  EDGELLM_EXACT_FP_SCOPE
  const GridMap& g = grid_iq1s();
  constexpr int kBlock = 16;
  const Iq1ShiftedValues v(IQ1M_DELTA);
  const float *x_p = v.p, *x_m = v.m;
  const uint8_t masks[4] = {0x00, 0x80, 0x08, 0x88};
  float scales[QK_K / kBlock], weight[kBlock];
  int8_t shifts[QK_K / kBlock];
  // shift k: bit 1 = first 8 weights use x_m, bit 0 = second 8 use x_m
  auto shift_values = [&](int k, int half) { return (half == 0 ? k < 2 : k % 2 == 0) ? x_p : x_m; };
  auto search = [&](const float* xb, const float* wb, const SortedX* sorted, Iq1Split* best) {
    // prefix sums per half (each half has its own shift); with v0 - v1 = v1 - v2 = -1 a split's
    // sum of w x q is T v2 - px[i1] - px[i2]
    float px[2][kBlock + 1], pw[2][kBlock + 1];
    px[0][0] = px[1][0] = 0;
    pw[0][0] = pw[1][0] = 0;
    for (int j = 0; j < kBlock; ++j) {
      const int i = sorted[j].i;
      const int h = i < kBlock / 2 ? 0 : 1;
      px[h][j + 1] = px[h][j] + wb[i] * xb[i];
      px[1 - h][j + 1] = px[1 - h][j];
      pw[h][j + 1] = pw[h][j] + wb[i];
      pw[1 - h][j + 1] = pw[1 - h][j];
    }
    const float txs[2] = {px[0][kBlock], px[1][kBlock]};
    const float tws[2] = {pw[0][kBlock], pw[1][kBlock]};
    const float p2 = x_p[2], m2 = x_m[2];
    const float cp1 = x_p[0] * x_p[0] - x_p[1] * x_p[1];
    const float cp2 = x_p[1] * x_p[1] - x_p[2] * x_p[2];
    const float cm1 = x_m[0] * x_m[0] - x_m[1] * x_m[1];
    const float cm2 = x_m[1] * x_m[1] - x_m[2] * x_m[2];
    float sumqx[4], sumq2[4];
    for (int i1 = 0; i1 <= kBlock; ++i1) {
      for (int i2 = i1; i2 <= kBlock; ++i2) {
        float qx_p[2], qx_m[2], q2_p[2], q2_m[2];
        for (int h = 0; h < 2; ++h) {
          const float sx = px[h][i1] + px[h][i2];
          qx_p[h] = txs[h] * p2 - sx;
          qx_m[h] = txs[h] * m2 - sx;
          q2_p[h] = tws[h] * p2 * p2 + pw[h][i1] * cp1 + pw[h][i2] * cp2;
          q2_m[h] = tws[h] * m2 * m2 + pw[h][i1] * cm1 + pw[h][i2] * cm2;
        }
        sumqx[0] = qx_p[0] + qx_p[1];
        sumqx[1] = qx_p[0] + qx_m[1];
        sumqx[2] = qx_m[0] + qx_p[1];
        sumqx[3] = qx_m[0] + qx_m[1];
        sumq2[0] = q2_p[0] + q2_p[1];
        sumq2[1] = q2_p[0] + q2_m[1];
        sumq2[2] = q2_m[0] + q2_p[1];
        sumq2[3] = q2_m[0] + q2_m[1];
        for (int k = 0; k < 4; ++k) best->consider(sumqx[k], sumq2[k], i1, i2, k);
      }
    }
  };
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    std::memset(y[ibl].qs, 0, sizeof(y[ibl].qs));
    std::memset(y[ibl].qh, 0, sizeof(y[ibl].qh));
    std::memset(y[ibl].scales, 0, sizeof(y[ibl].scales));
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = super_block_sigma2(xbl, 2.f);
    const float max_scale = iq1_super_block<kBlock>(
        xbl, qw_row ? qw_row + QK_K * ibl : nullptr, sigma2, kEpsIq1m, int8_t(0), scales, shifts, search,
        [](int k) { return 3 - k; }, shift_values,
        [&](int ib, const uint16_t* index) {
          y[ibl].qs[2 * ib + 0] = uint8_t(index[0] & 255);
          y[ibl].qs[2 * ib + 1] = uint8_t(index[1] & 255);
          y[ibl].qh[ib] = uint8_t((index[0] >> 8) | ((index[1] >> 8) << 4));
        });
    if (!max_scale) continue;
    uint16_t sc[4] = {};
    float d = max_scale / 15;
    const float id = 1 / d;
    float sumqx_f = 0, sumq2_f = 0;
    for (int ib = 0; ib < QK_K / kBlock; ++ib) {
      const int l = odd_scale4(id, scales[ib], 7);
      sc[ib / 4] |= uint16_t(l << 3 * (ib % 4));
      y[ibl].qh[ib] |= masks[shifts[ib]];
      const float* xb = xbl + kBlock * ib;
      group_weights(qw_row ? qw_row + QK_K * ibl + kBlock * ib : nullptr, xb, sigma2, kBlock, weight);
      for (int k = 0; k < kBlock / 8; ++k) {
        const float* xx = shift_values(shifts[ib], k);
        const int gi = y[ibl].qs[2 * ib + k] + ((y[ibl].qh[ib] << (8 - 4 * k)) & 0x700);
        const int8_t* pg = g.point(gi);
        for (int j = 0; j < 8; ++j) {
          const float w = weight[8 * k + j];
          const float q = xx[(pg[j] - 1) / 2] * (2 * l + 1);
          sumqx_f += w * q * xb[8 * k + j];
          sumq2_f += w * q * q;
        }
      }
    }
    if (sumq2_f > 0) d = sumqx_f / sumq2_f;
    const uint16_t s = fp32_to_fp16(d * 1.1125f);
    sc[0] |= uint16_t((s & 0x000f) << 12);
    sc[1] |= uint16_t((s & 0x00f0) << 8);
    sc[2] |= uint16_t((s & 0x0f00) << 4);
    sc[3] |= uint16_t(s & 0xf000);
    std::memcpy(y[ibl].scales, sc, sizeof(sc));
  }
}

// ---------------------------------------------------------------------------------------------
// IQ4_NL, IQ4_XS (non-linear 4-bit values kvalues_iq4nl).

// Index of the value in the sorted val[0..n) nearest x (the upper one on ties).
inline int best_index_int8(int n, const int8_t* val, float x) {
  EDGELLM_EXACT_FP_SCOPE
  if (x <= val[0]) return 0;
  if (x >= val[n - 1]) return n - 1;
  int ml = 0, mu = n - 1;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < val[mav]) {
      mu = mav;
    } else {
      ml = mav;
    }
  }
  return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

// One super-block of sbs weights in groups of 32: a scale per group from 2 ntry + 1 trial inverse
// scales around the max, then (IQ4_XS, sbs > 32) the 6-bit group scales of a block scale dh and
// the indexes requantized with them. L: [sbs] scratch; scales: [sbs / 32].
inline void iq4_super_block(int sbs, const float* x, uint16_t* dh, uint8_t* q4, uint16_t* scales_h, uint8_t* scales_l,
                            float* scales, uint8_t* L, const float* qw, int ntry) {
  EDGELLM_EXACT_FP_SCOPE
  constexpr int kBlock = 32;
  const int8_t* values = kvalues_iq4nl;
  float weight[kBlock];
  float sigma2 = sum_squares(x, sbs);
  sigma2 *= 2.f / sbs;
  std::memset(q4, 0, size_t(sbs / 2));
  dh[0] = fp32_to_fp16(0.f);
  for (int ib = 0; ib < sbs / kBlock; ++ib) {
    const float* xb = x + ib * kBlock;
    uint8_t* Lb = L + ib * kBlock;
    group_weights(qw ? qw + ib * kBlock : nullptr, xb, sigma2, kBlock, weight);
    float amax;
    const float max = signed_max(xb, kBlock, &amax);
    if (amax < kGroupMaxEps) {
      scales[ib] = 0;
      continue;
    }
    float d = ntry > 0 ? -max / values[0] : max / values[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < kBlock; ++j) {
      const int l = best_index_int8(16, values, id * xb[j]);
      Lb[j] = uint8_t(l);
      const float q = values[l];
      const float w = weight[j];
      sumqx += w * q * xb[j];
      sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; ++itry) {
      id = (itry + values[0]) / max;
      sumqx = sumq2 = 0;
      for (int j = 0; j < kBlock; ++j) {
        const float q = values[best_index_int8(16, values, id * xb[j])];
        const float w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
      }
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scales[ib] = d;
  }
  float amax_scale;
  const float max_scale = signed_max(scales, sbs / kBlock, &amax_scale);
  if (sbs / kBlock > 1) {
    const int nb = sbs / kBlock;
    std::memset(scales_h, 0, size_t((nb + 7) / 8) * sizeof(uint16_t));
    const float d = -max_scale / 32;
    dh[0] = fp32_to_fp16(d);
    const float id = d ? 1 / d : 0.f;
    for (int ib = 0; ib < nb; ++ib) {
      int l = std::max(-32, std::min(31, nearest_int(id * scales[ib])));
      const float dl = d * l;
      const float idl = dl ? 1 / dl : 0.f;
      uint8_t* Lb = L + ib * kBlock;
      const float* xb = x + ib * kBlock;
      for (int j = 0; j < kBlock; ++j) Lb[j] = uint8_t(best_index_int8(16, values, idl * xb[j]));
      l += 32;
      const uint8_t l_l = uint8_t(l & 0xf), l_h = uint8_t(l >> 4);
      if (ib % 2 == 0) {
        scales_l[ib / 2] = l_l;
      } else {
        scales_l[ib / 2] |= uint8_t(l_l << 4);
      }
      scales_h[ib / 8] |= uint16_t(l_h << 2 * (ib % 8));
    }
  } else {
    dh[0] = fp32_to_fp16(scales[0]);
    if (ntry > 0) {
      const float id = scales[0] ? 1 / scales[0] : 0;
      for (int j = 0; j < sbs; ++j) L[j] = uint8_t(best_index_int8(16, values, id * x[j]));
    }
  }
  for (int i = 0; i < sbs / 32; ++i)
    for (int j = 0; j < 16; ++j) q4[16 * i + j] = uint8_t(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

// ---------------------------------------------------------------------------------------------
// TQ1_0, TQ2_0 (ternary: round(x / amax) in {-1, 0, 1}).

inline float ternary_scale(const float* x, float* id) {
  float amax = 0.0f;
  for (int j = 0; j < QK_K; ++j) amax = std::max(amax, std::fabs(x[j]));
  *id = amax ? 1.0f / amax : 0.0f;
  return amax;
}
inline int ternary(float x, float id) {
  EDGELLM_EXACT_FP_SCOPE
  return int(std::lround(x * id)) + 1;  // -1, 0, 1 -> 0, 1, 2
}
// n trits (the first most significant) in a byte, scaled to [0, 256) rounding up: byte = ceil(v * 256 / 243)
// of the base-3 number v made 5 trits long.
inline uint8_t pack_trits(const float* x, int stride, int n, float id) {
  uint8_t q = 0;
  for (int t = 0; t < n; ++t) q = uint8_t(q * 3 + ternary(x[t * stride], id));
  for (int t = n; t < 5; ++t) q = uint8_t(q * 3);
  return uint8_t((uint16_t(q) * 256 + (243 - 1)) / 243);
}

// ---------------------------------------------------------------------------------------------
// Rows (n weights, whole blocks) of the types without a row function above.

inline void iq2_xs_row(const float* x, block_iq2_xs* y, int64_t n, const float* qw) { iq2_16_row<false>(x, y, n, qw); }
inline void iq2_s_row(const float* x, block_iq2_s* y, int64_t n, const float* qw) { iq2_16_row<true>(x, y, n, qw); }

// ggml's quantize_iq4_nl / quantize_iq4_xs use 7 trial scales each side (quantize_row_iq4_nl_ref: none).
inline void iq4_nl_row(const float* x, block_iq4_nl* y, int64_t n, const float* qw) {
  uint8_t L[QK4_NL];
  float scale;
  uint16_t unused_h;
  for (int64_t ib = 0; ib < n / QK4_NL; ++ib)
    iq4_super_block(QK4_NL, x + QK4_NL * ib, &y[ib].d, y[ib].qs, &unused_h, nullptr, &scale, L,
                    qw ? qw + QK4_NL * ib : nullptr, 7);
}
inline void iq4_xs_row(const float* x, block_iq4_xs* y, int64_t n, const float* qw) {
  uint8_t L[QK_K];
  float scales[QK_K / 32];
  for (int64_t ib = 0; ib < n / QK_K; ++ib)
    iq4_super_block(QK_K, x + QK_K * ib, &y[ib].d, y[ib].qs, &y[ib].scales_h, y[ib].scales_l, scales, L,
                    qw ? qw + QK_K * ib : nullptr, 7);
}

inline void tq1_0_row(const float* x, block_tq1_0* y, int64_t n, const float*) {
  constexpr int kQs = int(sizeof(y->qs)), kQh = int(sizeof(y->qh));
  constexpr int kQs32 = kQs - kQs % 32;  // bytes of 5 trits 32 apart; the rest 16 apart
  for (int64_t i = 0; i < n / QK_K; ++i) {
    float id;
    y[i].d = fp32_to_fp16(ternary_scale(x, &id));
    for (int j = 0; j < kQs32; j += 32, x += 5 * 32)
      for (int m = 0; m < 32; ++m) y[i].qs[j + m] = pack_trits(x + m, 32, 5, id);
    for (int j = kQs32; j < kQs; j += 16, x += 5 * 16)
      for (int m = 0; m < 16; ++m) y[i].qs[j + m] = pack_trits(x + m, 16, 5, id);
    for (int j = 0; j < kQh; ++j) y[i].qh[j] = pack_trits(x + j, kQh, 4, id);
    x += 4 * kQh;
  }
}
inline void tq2_0_row(const float* x, block_tq2_0* y, int64_t n, const float*) {
  for (int64_t i = 0; i < n / QK_K; ++i) {
    float id;
    y[i].d = fp32_to_fp16(ternary_scale(x, &id));
    for (int j = 0; j < int(sizeof(y->qs)); j += 32, x += 4 * 32)
      for (int m = 0; m < 32; ++m) {
        uint8_t q = 0;
        for (int t = 0; t < 4; ++t) q = uint8_t(q + ((ternary(x[m + t * 32], id) & 3) << (2 * t)));
        y[i].qs[j + m] = q;
      }
  }
}

template <class Row>
struct row_block;
template <class Block>
struct row_block<void (*)(const float*, Block*, int64_t, const float*)> {
  using type = Block;
};

// ggml's quantize_<type> of the i-quant and ternary types: nrows rows of n_per_row weights through
// Row; the imatrix (n_per_row weights) serves every row (IQ2_XXS, IQ2_XS and IQ1_S need it).
template <DType kType, auto Row>
inline size_t quantize_rows(const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* imatrix) {
  using Block = typename row_block<decltype(Row)>::type;
  constexpr int64_t kBlockWeights = dtype_block_size(kType);
  static_assert(sizeof(Block) == dtype_block_bytes(kType), "row quantizer of another type");
  const std::string type = dtype_upper_name(kType);
  check_shape(type.c_str(), nrows, n_per_row, kBlockWeights);
  if (kType == DType::IQ2_XXS || kType == DType::IQ2_XS || kType == DType::IQ1_S) require_imatrix(type.c_str(), imatrix);
  auto* y = static_cast<Block*>(dst);
  const int64_t nb = n_per_row / kBlockWeights;
  for (int64_t r = 0; r < nrows; ++r) Row(src + r * n_per_row, y + r * nb, n_per_row, imatrix);
  return size_t(nrows * nb) * sizeof(Block);
}

}  // namespace iq
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// The quantizers (ggml's quantize_<type>).

inline constexpr auto quantize_iq2_xxs = detail::iq::quantize_rows<DType::IQ2_XXS, detail::iq::iq2_xxs_row>;
inline constexpr auto quantize_iq2_xs = detail::iq::quantize_rows<DType::IQ2_XS, detail::iq::iq2_xs_row>;
inline constexpr auto quantize_iq2_s = detail::iq::quantize_rows<DType::IQ2_S, detail::iq::iq2_s_row>;
inline constexpr auto quantize_iq3_xxs = detail::iq::quantize_rows<DType::IQ3_XXS, detail::iq::iq3_xxs_row>;
inline constexpr auto quantize_iq3_s = detail::iq::quantize_rows<DType::IQ3_S, detail::iq::iq3_s_row>;
inline constexpr auto quantize_iq1_s = detail::iq::quantize_rows<DType::IQ1_S, detail::iq::iq1_s_row>;
inline constexpr auto quantize_iq1_m = detail::iq::quantize_rows<DType::IQ1_M, detail::iq::iq1_m_row>;
inline constexpr auto quantize_iq4_nl = detail::iq::quantize_rows<DType::IQ4_NL, detail::iq::iq4_nl_row>;
inline constexpr auto quantize_iq4_xs = detail::iq::quantize_rows<DType::IQ4_XS, detail::iq::iq4_xs_row>;
// The ternary types ignore the importance matrix, as ggml does.
inline constexpr auto quantize_tq1_0 = detail::iq::quantize_rows<DType::TQ1_0, detail::iq::tq1_0_row>;
inline constexpr auto quantize_tq2_0 = detail::iq::quantize_rows<DType::TQ2_0, detail::iq::tq2_0_row>;

namespace detail {
namespace iq {
template <class Block, size_t (*Quantize)(const float*, void*, int64_t, int64_t, const float*)>
inline void quantize_one_row(const float* EDGELLM_RESTRICT x, Block* EDGELLM_RESTRICT y, int64_t k) {
  Quantize(x, y, 1, k, nullptr);
}
}  // namespace iq
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Row quantizers without an importance matrix (ggml's quantize_row_<type>_ref, the types' from_float
// in quant/ref.hpp). IQ4_NL's is ggml's quick form (the first scale guess, no trial scales), not
// quantize_iq4_nl's; the others are quantize_<type> of one row. IQ2_XXS, IQ2_XS, IQ1_S (need an
// imatrix) and IQ1_M (ggml has none) have no row form.

inline void quantize_row_iq4_nl_ref(const float* EDGELLM_RESTRICT x, block_iq4_nl* EDGELLM_RESTRICT y, int64_t k) {
  detail::iq::check_shape("IQ4_NL", 1, k, QK4_NL);
  uint8_t L[QK4_NL];
  float scale;
  uint16_t unused_h;
  for (int64_t ib = 0; ib < k / QK4_NL; ++ib)
    detail::iq::iq4_super_block(QK4_NL, x + QK4_NL * ib, &y[ib].d, y[ib].qs, &unused_h, nullptr, &scale, L, nullptr,
                                -1);
}
inline constexpr auto quantize_row_iq4_xs_ref = detail::iq::quantize_one_row<block_iq4_xs, quantize_iq4_xs>;
inline constexpr auto quantize_row_iq3_xxs_ref = detail::iq::quantize_one_row<block_iq3_xxs, quantize_iq3_xxs>;
inline constexpr auto quantize_row_iq3_s_ref = detail::iq::quantize_one_row<block_iq3_s, quantize_iq3_s>;
inline constexpr auto quantize_row_iq2_s_ref = detail::iq::quantize_one_row<block_iq2_s, quantize_iq2_s>;
inline constexpr auto quantize_row_tq1_0_ref = detail::iq::quantize_one_row<block_tq1_0, quantize_tq1_0>;
inline constexpr auto quantize_row_tq2_0_ref = detail::iq::quantize_one_row<block_tq2_0, quantize_tq2_0>;

}  // namespace edgellm
EDGELLM_EXACT_FP_END
