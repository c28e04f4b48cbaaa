// The checklist for a new quant type: every DType against every kernel registration table this
// build carries (kernels/entry.hpp: the reference, each compiled x86 level, NEON ARMv8.0 and
// dotprod). A type passes an ISA when the ISA's table has its vec_dot (and its activation type a
// from_float there, its rows a to_float in the reference), or when it is listed as not supported
// (kNoKernelAnywhere in kernels/entry.hpp, or the kNotSupported list next to the ISA's
// registration, each with the reason). Then the tables this CPU runs are checked to hold the entries.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "edgellm/kernels/select.hpp"

using namespace edgellm;

namespace {

std::string ktab_name(Isa isa) {
  switch (isa) {
    case Isa::Ref: return "ref";
    case Isa::Neon: return "neon armv8.0";
    case Isa::Dotprod: return "neon dotprod";
    default: return std::string("x86 ") + isa_name(isa);
  }
}

const KernelEntry* ktab_find(const IsaKernelEntries& s, DType t, bool want_dot) {
  for (const KernelEntry& e : s.entries)
    if (e.type == t && (!want_dot || e.vec_dot)) return &e;
  return nullptr;
}

const NotSupported* ktab_not_supported(const IsaKernelEntries& s, DType t) {
  for (const NotSupported& n : kNoKernelAnywhere)
    if (n.type == t) return &n;
  for (const NotSupported& n : s.not_supported)
    if (n.type == t) return &n;
  return nullptr;
}

std::string ktab_join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// What the tables lack for type t ("x86 avx2 vec_dot", ...), and the lists that name t although
// the table has its kernel (a stale entry).
struct KtabGaps {
  std::vector<std::string> missing, stale;
};

// Does set s (or the set it is registered over, short of the reference) quantize activations to t?
bool ktab_has_from_float(const std::vector<IsaKernelEntries>& sets, const IsaKernelEntries& s, DType t) {
  const KernelEntry* e = ktab_find(s, t, false);
  if (e && e->from_float) return true;
  for (const IsaKernelEntries& o : sets)
    if (s.over != Isa::Ref && o.isa == s.over) return ktab_has_from_float(sets, o, t);
  return false;
}

KtabGaps ktab_gaps(DType t, const std::vector<IsaKernelEntries>& sets, const KernelTable& ref) {
  KtabGaps g;
  for (const IsaKernelEntries& s : sets) {
    const std::string name = ktab_name(s.isa);
    const KernelEntry* e = ktab_find(s, t, true);
    const NotSupported* ns = ktab_not_supported(s, t);
    if (!e && !ns) g.missing.push_back(name + " vec_dot");
    if (e && ns) g.stale.push_back(name + " (\"" + ns->reason + "\")");
    // An activation type needs this ISA's quantizer wherever a weight type of the ISA uses it
    // (the reference's come from quant/ref.hpp, so they are read from its table).
    bool is_activation = false;
    for (const KernelEntry& w : s.entries)
      if (w.vec_dot && dot_activation_type(w.type) == t && t != DType::F32) is_activation = true;
    if (is_activation) {
      const bool has = s.isa == Isa::Ref ? ref.of(t).from_float != nullptr : ktab_has_from_float(sets, s, t);
      if (!has) g.missing.push_back(name + " from_float");
    }
  }
  // The model dequantizes rows of any weight type (embeddings, the float fallback): the reference's
  // to_float is the one every ISA inherits.
  if (ref.of(t).vec_dot && !ref.of(t).to_float) g.missing.push_back("ref to_float");
  return g;
}

}  // namespace

TEST_CASE("every DType has kernels or a not-supported reason in every ISA table") {
  const std::vector<IsaKernelEntries> sets = compiled_kernel_entries();
  const KernelTable ref = make_kernel_table(Isa::Ref);
  std::vector<std::string> names;
  for (const IsaKernelEntries& s : sets) names.push_back(ktab_name(s.isa));
  MESSAGE("tables checked: ", ktab_join(names));
  int checked = 0;
  for (uint32_t id = 0; id < kDTypeCount; ++id) {
    if (!dtype_valid(id)) continue;
    const DType t = static_cast<DType>(id);
    ++checked;
    const KtabGaps g = ktab_gaps(t, sets, ref);
    if (!g.missing.empty())
      FAIL_CHECK(dtype_upper_name(t), ": no entry in ", ktab_join(g.missing),
                 "; add one or list it in kNotSupported (the ISA's register.hpp, or kNoKernelAnywhere in "
                 "kernels/entry.hpp)");
    if (!g.stale.empty())
      FAIL_CHECK(dtype_upper_name(t), ": listed as not supported by ", ktab_join(g.stale),
                 " but the table has its vec_dot; drop it from the list");
  }
  CHECK(checked >= 30);
}

TEST_CASE("the tables this CPU runs hold their registration entries") {
  const std::vector<IsaKernelEntries> sets = compiled_kernel_entries();
  const std::vector<Isa> runs = available_isas();
  for (const IsaKernelEntries& s : sets) {
    bool runnable = false;
    for (Isa i : runs) runnable = runnable || i == s.isa;
    if (!runnable) continue;
    const KernelTable t = make_kernel_table(s.isa);
    CAPTURE(ktab_name(s.isa));
    for (const KernelEntry& e : s.entries) {
      CAPTURE(dtype_name(e.type));
      const TypeKernels& k = t.of(e.type);
      if (e.vec_dot) {
        CHECK((k.vec_dot == e.vec_dot));
        CHECK((k.vec_dot_rows == e.vec_dot_rows));
        CHECK(k.vec_dot_type == dot_activation_type(e.type));
      }
      if (e.from_float) CHECK((k.from_float == e.from_float));
      if (e.to_float) CHECK((k.to_float == e.to_float));
    }
  }
}
