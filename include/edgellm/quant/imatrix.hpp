// Importance matrices (llama-imatrix's output, llama-quantize's --imatrix input): per matmul
// weight, the sum over a text of each input column's squared activation, and how many input rows
// were summed. Two file formats, both read and written here:
//
//  GGUF (llama-imatrix's default): metadata general.type = "imatrix", imatrix.datasets
//    (array[string], the text files), imatrix.chunk_count and imatrix.chunk_size (uint32); per
//    weight W two F32 tensors, "W.in_sum2" [n_cols, n_mat] (raw sums of squares) and "W.counts"
//    [1, n_mat] (rows summed, per matrix: n_mat > 1 only for 3-D expert weights), sorted by name.
//  Legacy .dat (--output-format dat): int32 n_entries, then per entry int32 name length, the
//    name, int32 ncall, int32 nval, nval float32 = (sum / count) * ncall; then, optionally,
//    int32 chunk count and int32 length + the text file's name. Little-endian throughout.
//
// An Imatrix keeps a file's numbers as stored (GGUF: sums and counts; .dat: the scaled means and
// {ncall}). weights() gives what llama-quantize hands the quantizers for a tensor: GGUF sums /
// count per matrix (1 where a matrix saw no rows), .dat values / ncall. Includes core/ and gguf/.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/core/memory.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/gguf/writer.hpp"

namespace edgellm {

inline constexpr const char* kImatrixKeyDatasets = "imatrix.datasets";
inline constexpr const char* kImatrixKeyChunkCount = "imatrix.chunk_count";
inline constexpr const char* kImatrixKeyChunkSize = "imatrix.chunk_size";
inline constexpr const char* kImatrixSumsSuffix = ".in_sum2";
inline constexpr const char* kImatrixCountsSuffix = ".counts";

enum class ImatrixFormat { Gguf, Dat };

// One weight's statistics, as its file stores them.
struct ImatrixEntry {
  // GGUF: raw sums of squared activations, n_mat consecutive rows of n_cols.
  // .dat: (sum / count) * ncall, one row per matrix as well.
  std::vector<float> sums;
  // GGUF: input rows summed, one per matrix. .dat: {ncall}.
  std::vector<int64_t> counts;

  // GGUF: counts.size(); .dat: a single scale for every matrix.
  int64_t n_cols(ImatrixFormat f) const {
    const size_t n_mat = f == ImatrixFormat::Gguf ? counts.size() : 1;
    return n_mat ? static_cast<int64_t>(sums.size() / n_mat) : 0;
  }
};

struct Imatrix {
  std::string path;  // where it was read from (messages); empty when built in memory
  ImatrixFormat format = ImatrixFormat::Gguf;
  std::map<std::string, ImatrixEntry> entries;  // by weight name, sorted
  std::vector<std::string> datasets;            // text files it was computed on
  int32_t chunk_count = 0;                      // chunks of text processed
  int32_t chunk_size = 0;                       // tokens per chunk (GGUF only; 0 for .dat)
  bool has_metadata = false;                    // GGUF: all three imatrix.* keys present

  const ImatrixEntry* find(const std::string& name) const {
    auto it = entries.find(name);
    return it == entries.end() ? nullptr : &it->second;
  }

  // The per-column importance llama-quantize derives for weight `name` (n_mat * n_cols values);
  // empty when the matrix has no entry for it.
  std::vector<float> weights(const std::string& name) const {
    const ImatrixEntry* e = find(name);
    return e ? entry_weights(*e) : std::vector<float>();
  }

  // weights() of every entry (llama-quantize's imatrix_data).
  std::unordered_map<std::string, std::vector<float>> all_weights() const {
    std::unordered_map<std::string, std::vector<float>> out;
    for (const auto& kv : entries) out.emplace(kv.first, entry_weights(kv.second));
    return out;
  }

  std::vector<float> entry_weights(const ImatrixEntry& e) const {
    std::vector<float> w(e.sums.size());
    if (format == ImatrixFormat::Dat) {
      const int64_t ncall = e.counts.empty() ? 0 : e.counts[0];
      for (size_t i = 0; i < w.size(); ++i) w[i] = ncall > 0 ? e.sums[i] / static_cast<float>(ncall) : e.sums[i];
      return w;
    }
    const size_t n_mat = e.counts.size();
    const size_t n_cols = n_mat ? e.sums.size() / n_mat : 0;
    for (size_t m = 0; m < n_mat; ++m) {
      const float count = static_cast<float>(e.counts[m]);
      for (size_t i = 0; i < n_cols; ++i) w[m * n_cols + i] = count > 0.0f ? e.sums[m * n_cols + i] / count : 1.0f;
    }
    return w;
  }
};

// Accumulates an importance matrix in llama-imatrix's raw form: per weight, the sum over every
// input row of each column's square (in float, row after row, as llama-imatrix adds them) and the
// number of rows. chunk_size: tokens per chunk of text (the matrix's chunk count is the largest row
// count / chunk_size).
class ImatrixCollector {
 public:
  explicit ImatrixCollector(int32_t chunk_size) : chunk_size_(chunk_size) {
    EDGELLM_CHECK(chunk_size > 0, "imatrix: chunk size ", chunk_size, " is not positive");
  }

  // Rows x [n_rows, n_cols] entered weight `name`. Throws when the weight saw rows of another
  // length before, or when a sum stops being finite.
  void add(const std::string& name, const float* x, int n_rows, int n_cols) {
    ImatrixEntry& e = m_.entries[name];
    if (e.sums.empty()) {
      e.sums.assign(static_cast<size_t>(n_cols), 0.0f);
      e.counts.assign(1, 0);
    }
    EDGELLM_CHECK(e.sums.size() == static_cast<size_t>(n_cols), "imatrix: weight '", name, "' had inputs of ",
                  e.sums.size(), " columns, now ", n_cols);
    float* acc = e.sums.data();
    for (int r = 0; r < n_rows; ++r) {
      const float* row = x + static_cast<size_t>(r) * static_cast<size_t>(n_cols);
      for (int j = 0; j < n_cols; ++j) acc[j] += row[j] * row[j];
    }
    for (int j = 0; j < n_cols; ++j)
      EDGELLM_CHECK(std::isfinite(acc[j]), "imatrix: non-finite sum in weight '", name, "' column ", j);
    e.counts[0] += n_rows;
    m_.chunk_count = std::max(m_.chunk_count, static_cast<int32_t>(e.counts[0] / chunk_size_));
  }

  int32_t chunk_count() const { return m_.chunk_count; }
  size_t n_entries() const { return m_.entries.size(); }

  // The matrix so far, in the raw (GGUF) form, computed on the text files `datasets`.
  Imatrix result(const std::vector<std::string>& datasets) const {
    Imatrix m = m_;
    m.format = ImatrixFormat::Gguf;
    m.chunk_size = chunk_size_;
    m.datasets = datasets;
    m.has_metadata = true;
    return m;
  }

 private:
  int32_t chunk_size_;
  Imatrix m_;
};

namespace detail {

// ---- .dat ----

struct ImatrixDatCursor {
  const uint8_t* p;
  size_t size;
  size_t pos;
  const std::string& path;

  [[noreturn]] void fail(const std::string& what) const {
    throw_error("imatrix file ", path, ": ", what, " (at byte ", pos, " of ", size, ")");
  }
  bool has(size_t n) const { return n <= size - pos; }
  int32_t i32(const std::string& what) {
    if (!has(4)) fail("truncated: " + what);
    int32_t v;
    std::memcpy(&v, p + pos, 4);
    pos += 4;
    return v;
  }
};

inline Imatrix parse_imatrix_dat(const uint8_t* data, size_t size, const std::string& path) {
  Imatrix m;
  m.path = path;
  m.format = ImatrixFormat::Dat;
  ImatrixDatCursor c{data, size, 0, path};
  const int32_t n_entries = c.i32("entry count");
  if (n_entries < 1) c.fail("no entries (count " + std::to_string(n_entries) + ")");
  for (int32_t i = 0; i < n_entries; ++i) {
    const std::string ent = "entry " + std::to_string(i);
    const int32_t len = c.i32(ent + " name length");
    if (len < 0 || !c.has(static_cast<size_t>(len))) c.fail(ent + ": name length " + std::to_string(len) + " is out of range");
    // llama.cpp reads the name as a C string: it ends at the first NUL.
    std::string name(reinterpret_cast<const char*>(c.p + c.pos), static_cast<size_t>(len));
    name = name.c_str();
    c.pos += static_cast<size_t>(len);
    const std::string en = ent + " '" + name + "'";
    if (name.empty()) c.fail(ent + ": empty name");
    const int32_t ncall = c.i32(en + " ncall");
    const int32_t nval = c.i32(en + " value count");
    if (nval < 1) c.fail(en + ": value count " + std::to_string(nval) + " is not positive");
    if (!c.has(static_cast<size_t>(nval) * 4))
      c.fail("truncated: " + en + " needs " + std::to_string(nval) + " float values");
    ImatrixEntry e;
    e.sums.resize(static_cast<size_t>(nval));
    std::memcpy(e.sums.data(), c.p + c.pos, static_cast<size_t>(nval) * 4);
    c.pos += static_cast<size_t>(nval) * 4;
    e.counts = {ncall};
    if (!m.entries.emplace(name, std::move(e)).second) c.fail(en + ": duplicate entry");
  }
  // Optional trailer: chunk count, then the text file's name.
  if (c.has(4)) {
    m.chunk_count = c.i32("chunk count");
    if (c.has(4)) {
      const int32_t len = c.i32("dataset name length");
      if (len > 0) {
        if (!c.has(static_cast<size_t>(len))) c.fail("dataset name length " + std::to_string(len) + " exceeds the file");
        std::string ds(reinterpret_cast<const char*>(c.p + c.pos), static_cast<size_t>(len));
        m.datasets.push_back(ds.c_str());
        c.pos += static_cast<size_t>(len);
      }
    }
  }
  return m;
}

// ---- GGUF ----

inline bool strip_suffix(std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  if (s.size() < n || s.compare(s.size() - n, n, suffix) != 0) return false;
  s.resize(s.size() - n);
  return true;
}

inline Imatrix parse_imatrix_gguf(const GgufFile& f) {
  Imatrix m;
  m.path = f.path();
  m.format = ImatrixFormat::Gguf;
  const std::string where = "imatrix file " + f.path() + ": ";
  if (f.tensors().empty()) throw_error(where, "no entries (no tensors)");
  if (const GgufValue* v = f.find(kImatrixKeyDatasets)) {
    if (v->type == GgufType::ARRAY && v->arr_type == GgufType::STRING) m.datasets = v->arr_str;
  }
  auto get_u32 = [&](const char* key) -> int32_t {
    const GgufValue* v = f.find(key);
    if (!v) return 0;
    if (v->type != GgufType::UINT32) throw_error(where, "key '", key, "': expected uint32, got ", v->type_string());
    uint32_t u;
    std::memcpy(&u, v->raw, 4);
    return static_cast<int32_t>(u);
  };
  m.chunk_count = get_u32(kImatrixKeyChunkCount);
  m.chunk_size = get_u32(kImatrixKeyChunkSize);
  m.has_metadata = f.has(kImatrixKeyDatasets) && f.has(kImatrixKeyChunkCount) && f.has(kImatrixKeyChunkSize);

  std::map<std::string, std::pair<const GgufTensorInfo*, const GgufTensorInfo*>> pairs;
  for (const GgufTensorInfo& t : f.tensors()) {
    std::string name = t.name;
    if (strip_suffix(name, kImatrixSumsSuffix)) pairs[name].first = &t;
    else if (strip_suffix(name, kImatrixCountsSuffix)) pairs[name].second = &t;
  }
  for (const auto& kv : pairs) {
    const std::string& name = kv.first;
    const GgufTensorInfo* sums = kv.second.first;
    const GgufTensorInfo* counts = kv.second.second;
    const std::string en = "entry '" + name + "': ";
    if (!sums) throw_error(where, en, "has '", name, kImatrixCountsSuffix, "' but no '", name, kImatrixSumsSuffix, "'");
    if (!counts) throw_error(where, en, "has '", name, kImatrixSumsSuffix, "' but no '", name, kImatrixCountsSuffix, "'");
    if (sums->type != DType::F32 || counts->type != DType::F32)
      throw_error(where, en, "sums and counts must be F32, got ", dtype_name(sums->type), " and ",
                  dtype_name(counts->type));
    const int64_t nval = sums->n_elements(), ncounts = counts->n_elements();
    if (nval < 1 || ncounts < 1 || nval % ncounts != 0)
      throw_error(where, en, nval, " sums do not split into ", ncounts, " matrices");
    ImatrixEntry e;
    e.sums.resize(static_cast<size_t>(nval));
    std::memcpy(e.sums.data(), sums->data, static_cast<size_t>(nval) * 4);
    e.counts.resize(static_cast<size_t>(ncounts));
    for (int64_t j = 0; j < ncounts; ++j) {
      float c;
      std::memcpy(&c, counts->data + j * 4, 4);
      if (!(c >= 0.0f) || c > 9.0e18f) throw_error(where, en, "count ", j, " is ", c);
      e.counts[static_cast<size_t>(j)] = std::lround(c);
    }
    m.entries.emplace(name, std::move(e));
  }
  if (m.entries.empty()) throw_error(where, "no entries (no '*", kImatrixSumsSuffix, "' tensors)");
  return m;
}

inline Imatrix parse_imatrix(MappedFile file) {
  const std::string path = file.path();
  if (file.size() == 0) throw_error("imatrix file ", path, ": empty");
  if (file.size() >= 4) {
    uint32_t magic;
    std::memcpy(&magic, file.data(), 4);
    if (magic == kGgufMagic) return parse_imatrix_gguf(GgufFile(std::move(file)));
  }
  return parse_imatrix_dat(file.data(), file.size(), path);
}

}  // namespace detail

// Reads either format (GGUF when the file starts with the GGUF magic, else .dat). Throws Error
// naming the file and the entry for a bad file.
inline Imatrix load_imatrix(const std::string& path) {
  return detail::parse_imatrix(MappedFile(path, MappedFile::Mode::Read));
}
inline Imatrix parse_imatrix_bytes(const std::vector<uint8_t>& bytes, const std::string& name = "<memory>") {
  return detail::parse_imatrix(MappedFile::from_bytes(bytes, name));
}

// A .dat matrix in GGUF's raw form, as llama-imatrix does when it loads one: values and counts
// times the chunk size the new run uses.
inline Imatrix imatrix_dat_to_raw(const Imatrix& dat, int32_t chunk_size) {
  EDGELLM_CHECK(dat.format == ImatrixFormat::Dat, "imatrix ", dat.path, ": already in the raw (GGUF) form");
  EDGELLM_CHECK(chunk_size > 0, "imatrix ", dat.path, ": chunk size ", chunk_size, " is not positive");
  Imatrix m = dat;
  m.format = ImatrixFormat::Gguf;
  m.chunk_size = chunk_size;
  m.has_metadata = true;
  int64_t max_count = 0;
  for (auto& kv : m.entries) {
    ImatrixEntry& e = kv.second;
    for (float& v : e.sums) v *= static_cast<float>(chunk_size);
    e.counts = {(e.counts.empty() ? 0 : e.counts[0]) * chunk_size};
    max_count = std::max(max_count, e.counts[0]);
  }
  m.chunk_count = static_cast<int32_t>(max_count / chunk_size);
  return m;
}

// ---- writing ----

// llama-imatrix's GGUF file of a raw-form matrix: the metadata, then per entry (by name) its
// sums [n_cols, n_mat] and counts [1, n_mat] as F32.
inline std::vector<uint8_t> imatrix_gguf_bytes(const Imatrix& m) {
  EDGELLM_CHECK(m.format == ImatrixFormat::Gguf, "imatrix ", m.path,
                ": a .dat matrix has no raw counts (convert it with imatrix_dat_to_raw first)");
  GgufWriter w;
  w.set_string("general.type", "imatrix");
  w.set_array_string(kImatrixKeyDatasets, m.datasets);
  w.set_u32(kImatrixKeyChunkCount, static_cast<uint32_t>(m.chunk_count));
  w.set_u32(kImatrixKeyChunkSize, static_cast<uint32_t>(m.chunk_size));
  std::vector<std::vector<float>> counts_f;  // the writer keeps pointers: stable storage
  counts_f.reserve(m.entries.size());
  for (const auto& kv : m.entries) {
    const ImatrixEntry& e = kv.second;
    const int64_t n_mat = static_cast<int64_t>(e.counts.size());
    if (e.sums.empty() || n_mat == 0) continue;
    EDGELLM_CHECK(static_cast<int64_t>(e.sums.size()) % n_mat == 0, "imatrix entry '", kv.first, "': ",
                  e.sums.size(), " sums do not split into ", n_mat, " matrices");
    // ggml writes as many dims as are not trailing 1s.
    Shape s_sums = n_mat > 1 ? Shape{static_cast<int64_t>(e.sums.size()) / n_mat, n_mat}
                             : Shape{static_cast<int64_t>(e.sums.size())};
    Shape s_counts = n_mat > 1 ? Shape{1, n_mat} : Shape{1};
    counts_f.emplace_back(e.counts.begin(), e.counts.end());
    w.add_tensor(kv.first + kImatrixSumsSuffix, DType::F32, s_sums, e.sums.data());
    w.add_tensor(kv.first + kImatrixCountsSuffix, DType::F32, s_counts, counts_f.back().data());
  }
  return w.to_bytes();
}

// llama-imatrix's legacy .dat file. Raw form: entries whose counts are all zero are left out,
// ncall = ceil(max count / chunk size), values (sum / count) * ncall (1 * ncall for a matrix
// that saw no rows). A .dat-form matrix is written as it was read.
inline std::vector<uint8_t> imatrix_dat_bytes(const Imatrix& m) {
  const bool raw = m.format == ImatrixFormat::Gguf;
  EDGELLM_CHECK(!raw || m.chunk_size > 0, "imatrix ", m.path, ": chunk size ", m.chunk_size,
                " is not positive, and the .dat format needs it");
  std::vector<uint8_t> out;
  auto put_i32 = [&](int32_t v) {
    uint8_t b[4];
    std::memcpy(b, &v, 4);
    out.insert(out.end(), b, b + 4);
  };
  auto put_f32 = [&](float v) {
    uint8_t b[4];
    std::memcpy(b, &v, 4);
    out.insert(out.end(), b, b + 4);
  };
  std::vector<const std::pair<const std::string, ImatrixEntry>*> stored;
  for (const auto& kv : m.entries) {
    const auto& c = kv.second.counts;
    if (c.empty() || kv.second.sums.empty()) continue;
    if (raw && std::all_of(c.begin(), c.end(), [](int64_t x) { return x == 0; })) continue;
    stored.push_back(&kv);
  }
  put_i32(static_cast<int32_t>(stored.size()));
  for (const auto* kv : stored) {
    const ImatrixEntry& e = kv->second;
    put_i32(static_cast<int32_t>(kv->first.size()));
    out.insert(out.end(), kv->first.begin(), kv->first.end());
    const int64_t nval = static_cast<int64_t>(e.sums.size());
    if (!raw) {
      put_i32(static_cast<int32_t>(e.counts[0]));
      put_i32(static_cast<int32_t>(nval));
      for (float v : e.sums) put_f32(v);
      continue;
    }
    const int64_t n_mat = static_cast<int64_t>(e.counts.size());
    const int64_t max_count = *std::max_element(e.counts.begin(), e.counts.end());
    const int32_t ncall = static_cast<int32_t>((max_count + (m.chunk_size - 1)) / m.chunk_size);
    put_i32(ncall);
    put_i32(static_cast<int32_t>(nval));
    for (int64_t i = 0; i < nval; ++i) {
      float count = static_cast<float>(e.counts[static_cast<size_t>(i / (nval / n_mat))]);
      float value = e.sums[static_cast<size_t>(i)];
      if (count == 0.0f) value = count = 1.0f;
      put_f32((value / count) * static_cast<float>(ncall));
    }
  }
  put_i32(m.chunk_count);
  const std::string ds = m.datasets.empty() ? std::string() : m.datasets.back();
  put_i32(static_cast<int32_t>(ds.size()));
  out.insert(out.end(), ds.begin(), ds.end());
  return out;
}

namespace detail {
inline void write_file_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw_error("file ", path, ": cannot create");
  const bool ok = bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    throw_error("file ", path, ": write failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw_error("file ", path, ": cannot rename from ", tmp);
  }
}
}  // namespace detail

inline void save_imatrix_gguf(const Imatrix& m, const std::string& path) {
  detail::write_file_bytes(path, imatrix_gguf_bytes(m));
}
inline void save_imatrix_dat(const Imatrix& m, const std::string& path) {
  detail::write_file_bytes(path, imatrix_dat_bytes(m));
}

}  // namespace edgellm
