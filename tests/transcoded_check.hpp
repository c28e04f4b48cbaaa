// Checks shared by the transcoded forms' kernel and model tests (kernels/layouts/transcoded_iquants.hpp).
#pragma once
#include <cstdint>
#include <vector>

#include "edgellm/kernels/layouts/transcoded_iquants.hpp"

namespace edgellm_test {

// unpack_u8 of the transcoded row (the u8 prefill GEMM's weights) is unpack_row_u8 of the file's,
// every byte and float: u, s, m and the K form's integer scales and d.
inline bool unpacks_as_file(edgellm::DType type, const void* x, edgellm::UnpackRowU8Fn unpack_t, const void* t, int64_t n) {
  auto unpacked = [n](auto&& unpack) {
    std::vector<uint8_t> u(static_cast<size_t>(n));
    std::vector<float> s(size_t(n / 16)), m(size_t(n / 16)), d(size_t(n / QK_K));
    std::vector<int16_t> sc(size_t(n / 16));
    unpack(u.data(), s.data(), m.data(), edgellm::unpack::KScales{sc.data(), d.data()});
    std::vector<uint8_t> all(u);
    for (const auto* v : {static_cast<const void*>(s.data()), static_cast<const void*>(m.data())})
      all.insert(all.end(), static_cast<const uint8_t*>(v), static_cast<const uint8_t*>(v) + 4 * size_t(n / 16));
    all.insert(all.end(), reinterpret_cast<const uint8_t*>(sc.data()), reinterpret_cast<const uint8_t*>(sc.data() + sc.size()));
    all.insert(all.end(), reinterpret_cast<const uint8_t*>(d.data()), reinterpret_cast<const uint8_t*>(d.data() + d.size()));
    return all;
  };
  using edgellm::unpack::KScales;
  return unpacked([&](uint8_t* u, float* s, float* m, const KScales& ks) {
           edgellm::unpack_row_u8(type, x, n, u, s, m, ks);
         }) == unpacked([&](uint8_t* u, float* s, float* m, const KScales& ks) { unpack_t(t, n, u, s, m, ks); });
}

}  // namespace edgellm_test
