// TensorView (non-owning, any DType, up to 4-D with byte strides, ggml order: ne[0] is the row
// length) and Tensor<T> (owning, aligned, contiguous). Standard library + core only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "edgellm/config.hpp"
#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/core/memory.hpp"

namespace edgellm {

inline constexpr int kMaxDims = 4;

// Element counts per dimension; unused dimensions are 1. ne[0] varies fastest.
struct Shape {
  int n_dims = 1;
  int64_t ne[kMaxDims] = {1, 1, 1, 1};

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) {
    EDGELLM_CHECK(dims.size() >= 1 && dims.size() <= kMaxDims, "shape needs 1..4 dims, got ", dims.size());
    n_dims = static_cast<int>(dims.size());
    int i = 0;
    for (int64_t d : dims) {
      EDGELLM_CHECK(d >= 0, "shape dim ", i, " is negative (", d, ")");
      ne[i++] = d;
    }
  }
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  bool operator==(const Shape& o) const {
    for (int i = 0; i < kMaxDims; ++i)
      if (ne[i] != o.ne[i]) return false;
    return true;
  }
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < n_dims; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
  }
};

// A typed window onto bytes owned elsewhere (a mapped GGUF file, a Tensor<T>, a cache block).
// Strides nb[i] are in bytes; nb[0] is the size of one block (quantized) or element.
class TensorView {
 public:
  TensorView() = default;
  // Contiguous tensor of `shape` at `data`.
  TensorView(DType type, const void* data, const Shape& shape) : type_(type), data_(data), shape_(shape) {
    nb_[0] = dtype_block_bytes(type);
    nb_[1] = dtype_row_bytes(type, shape.ne[0]);
    for (int i = 2; i < kMaxDims; ++i) nb_[i] = nb_[i - 1] * static_cast<size_t>(shape.ne[i - 1]);
  }
  // With explicit byte strides (views, slices).
  TensorView(DType type, const void* data, const Shape& shape, const size_t nb[kMaxDims])
      : type_(type), data_(data), shape_(shape) {
    for (int i = 0; i < kMaxDims; ++i) nb_[i] = nb[i];
  }

  DType type() const { return type_; }
  const void* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  int n_dims() const { return shape_.n_dims; }
  int64_t ne(int i) const { return shape_.ne[i]; }
  size_t nb(int i) const { return nb_[i]; }
  int64_t n_elements() const { return shape_.n_elements(); }
  int64_t n_rows() const { return shape_.n_rows(); }
  size_t row_bytes() const { return dtype_row_bytes(type_, shape_.ne[0]); }
  size_t n_bytes() const { return row_bytes() * static_cast<size_t>(n_rows()); }
  bool contiguous() const {
    if (nb_[1] != row_bytes()) return false;
    for (int i = 2; i < kMaxDims; ++i)
      if (nb_[i] != nb_[i - 1] * static_cast<size_t>(shape_.ne[i - 1])) return false;
    return true;
  }

  // Row i counted over dims 1..3 (i = i1 + ne1 * (i2 + ne2 * i3)).
  const uint8_t* row(int64_t i) const {
    EDGELLM_DASSERT(i >= 0 && i < n_rows());
    const int64_t i1 = i % shape_.ne[1], r = i / shape_.ne[1];
    const int64_t i2 = r % shape_.ne[2], i3 = r / shape_.ne[2];
    return static_cast<const uint8_t*>(data_) + i1 * nb_[1] + i2 * nb_[2] + i3 * nb_[3];
  }

  // Elements [begin, begin + count) of the outermost used dimension.
  TensorView slice(int64_t begin, int64_t count) const {
    const int d = shape_.n_dims - 1;
    EDGELLM_CHECK(begin >= 0 && count >= 0 && begin + count <= shape_.ne[d], "slice [", begin, ", ",
                  begin + count, ") out of range for dim ", d, " of ", shape_.str());
    Shape s = shape_;
    s.ne[d] = count;
    return TensorView(type_, static_cast<const uint8_t*>(data_) + begin * nb_[d], s, nb_);
  }

  // Typed element pointer for plain types; throws when T does not match the DType's size.
  template <class T>
  const T* as() const {
    EDGELLM_CHECK(!dtype_is_quantized(type_) && dtype_block_bytes(type_) == sizeof(T), "tensor of type ",
                  dtype_name(type_), " viewed as ", sizeof(T), "-byte elements");
    return static_cast<const T*>(data_);
  }

 private:
  DType type_ = DType::F32;
  const void* data_ = nullptr;
  Shape shape_;
  size_t nb_[kMaxDims] = {0, 0, 0, 0};
};

template <class T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::F32; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::I8; };
template <> struct DTypeOf<int16_t> { static constexpr DType value = DType::I16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::I32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::I64; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::F64; };

// Owning, contiguous, 64-byte aligned, zero-initialised tensor of plain elements.
template <class T>
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(const Shape& shape) : shape_(shape), buf_(aligned_bytes(bytes_for(shape))) {}

  const Shape& shape() const { return shape_; }
  int64_t ne(int i) const { return shape_.ne[i]; }
  int64_t size() const { return shape_.n_elements(); }
  T* data() { return reinterpret_cast<T*>(buf_.get()); }
  const T* data() const { return reinterpret_cast<const T*>(buf_.get()); }
  T& operator[](int64_t i) { return data()[i]; }
  const T& operator[](int64_t i) const { return data()[i]; }
  T* row(int64_t i) { return data() + i * shape_.ne[0]; }
  const T* row(int64_t i) const { return data() + i * shape_.ne[0]; }
  TensorView view() const { return TensorView(DTypeOf<T>::value, data(), shape_); }

 private:
  static size_t bytes_for(const Shape& s) {
    const int64_t n = s.n_elements();
    EDGELLM_CHECK(n >= 0 && static_cast<uint64_t>(n) <= SIZE_MAX / sizeof(T), "tensor of shape ", s.str(),
                  " is too large");
    return static_cast<size_t>(n) * sizeof(T);
  }
  Shape shape_;
  std::unique_ptr<uint8_t, AlignedFree> buf_;
};

}  // namespace edgellm
