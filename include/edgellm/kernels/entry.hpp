// KernelEntry: the one shape of every ISA's registration table (kernels/scalar/register.hpp,
// kernels/neon/register.hpp, kernels/x86/register_level-inl.hpp): one row per type with the ISA's
// kernels for it, applied to a KernelTable by register_entries(). Next to each table, an explicit
// NotSupported list names the types that ISA multiplies with no kernel of its own, each with the
// reason. tests/kernels/test_kernel_tables.cpp walks every DType against both lists: it is the
// checklist for a new quant type (docs/ARCHITECTURE.md, "where to change what").
#pragma once
#include <cstddef>

#include "edgellm/kernels/api.hpp"

namespace edgellm {

// A type's kernels on one ISA. Null fields leave the table's entry as it was (the reference's,
// or the table registered before: NEON dotprod over ARMv8.0).
struct KernelEntry {
  DType type;
  VecDotFn vec_dot = nullptr;
  VecDotRowsFn vec_dot_rows = nullptr;  // null: the driver calls vec_dot row by row
  int rows_per_call = 1;                // vec_dot_rows' best row count
  FromFloatFn from_float = nullptr;     // an activation type's quantizer
  ToFloatFn to_float = nullptr;         // a faster row conversion (KV cache rows)
};

// A type an ISA's table has no vec_dot for, on purpose.
struct NotSupported {
  DType type;
  const char* reason;
};

// A read-only view of one of the tables above (a C array, or none).
template <class T>
struct TableView {
  const T* first = nullptr;
  size_t count = 0;
  constexpr TableView() = default;
  template <size_t N>
  constexpr TableView(const T (&a)[N]) : first(a), count(N) {}  // NOLINT: implicit from an array
  constexpr const T* begin() const { return first; }
  constexpr const T* end() const { return first + count; }
};

// The types no ISA multiplies: activation formats and tensors that are not weights. Every ISA's
// NotSupported list starts from these (kernel_entries_complete in the test adds them).
inline constexpr NotSupported kNoKernelAnywhere[] = {
    {DType::Q8_1, "activation-only type (q4_1 / q5_1 activations)"},
    {DType::Q8_K, "activation-only type (K-quant and i-quant activations)"},
    {DType::I8, "integer tensor, not a weight format"},
    {DType::I16, "integer tensor, not a weight format"},
    {DType::I32, "integer tensor, not a weight format"},
    {DType::I64, "integer tensor, not a weight format"},
    {DType::F64, "double tensor, not a weight format"},
    {DType::MXFP4, "no kernel on any ISA yet (nor a row converter in quant/dequantize.hpp)"},
};

// One ISA's registration as the completeness test reads it.
struct IsaKernelEntries {
  Isa isa;
  TableView<KernelEntry> entries;
  TableView<NotSupported> not_supported;  // beyond kNoKernelAnywhere
  Isa over = Isa::Ref;                    // the table it is registered over (dotprod: NEON)
};

// Writes the entries into t; variant names the ISA in TypeKernels::variant.
inline void register_entries(KernelTable& t, TableView<KernelEntry> entries, const char* variant) {
  for (const KernelEntry& e : entries) {
    TypeKernels& k = t.of(e.type);
    if (e.vec_dot) {
      k.vec_dot = e.vec_dot;
      k.vec_dot_rows = e.vec_dot_rows;
      k.rows_per_call = e.vec_dot_rows ? e.rows_per_call : 1;
      k.vec_dot_type = dot_activation_type(e.type);
      k.variant = variant;
    }
    if (e.from_float) k.from_float = e.from_float;
    if (e.to_float) k.to_float = e.to_float;
  }
}

}  // namespace edgellm
