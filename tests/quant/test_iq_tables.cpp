// The i-quant codebooks (quant/iq_tables.hpp) against ggml's: for each table its size, its order
// (ggml's grids list their points in increasing uint64 / uint32 value), a 64-bit FNV-1a checksum
// of its bytes (entries little-endian, in index order) and its first, middle and last entries, all
// computed from ggml-common.h of the llama.cpp release that wrote ../shared/data/iq.
#include <doctest/doctest.h>

#include <cstdint>

#include "edgellm/quant/iq_tables.hpp"

namespace {

template <class Grid>
uint64_t fnv1a_of(const Grid& g, int bytes_per_entry) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < g.size(); ++i)
    for (int b = 0; b < bytes_per_entry; ++b) {
      h ^= (uint64_t(g[i]) >> (8 * b)) & 0xff;
      h *= 0x100000001b3ull;
    }
  return h;
}

template <class Grid>
void check_grid(const char* name, const Grid& g, int bytes, uint64_t fnv, uint64_t first, uint64_t mid, uint64_t last,
                bool sorted) {
  INFO(name);
  CHECK(fnv1a_of(g, bytes) == fnv);
  CHECK(uint64_t(g[0]) == first);
  CHECK(uint64_t(g[g.size() / 2]) == mid);
  CHECK(uint64_t(g[g.size() - 1]) == last);
  if (sorted)
    for (size_t i = 1; i < g.size(); ++i) REQUIRE(g[i - 1] < g[i]);
}

}  // namespace

TEST_CASE("i-quant grids equal ggml's") {
  using namespace edgellm;
  check_grid("iq2xxs", iq2xxs_grid, 8, 0xbb4ee025b5ac6e8eull, 0x808080808080808ull, 0x82b2b0808082b08ull,
             0x2b2b2b1908081908ull, true);
  check_grid("iq2xs", iq2xs_grid, 8, 0xc9b1ee61e79909bdull, 0x808080808080808ull, 0x190808080808192bull,
             0x2b2b2b2b2b2b2b2bull, true);
  check_grid("iq2s", iq2s_grid, 8, 0x123edd38a3b62b90ull, 0x808080808080808ull, 0x19080819082b1919ull,
             0x2b2b2b2b2b2b2b2bull, true);
  check_grid("iq3xxs", iq3xxs_grid, 4, 0xdfa5dc83d6a155d5ull, 0x4040404ull, 0x141c3e04ull, 0x3e341c04ull, true);
  check_grid("iq3s", iq3s_grid, 4, 0xfa37020c25b44829ull, 0x1010101ull, 0x5090507ull, 0xf0f0101ull, true);
  // IQ1_S's points hold int8 -1 as 0xff, so its uint64 order is not ggml's listing order.
  check_grid("iq1s", iq1s_grid, 8, 0x6703ed863501ae2eull, 0xffffffffffffffffull, 0xff0100ull, 0x101010101010101ull,
             false);
}

TEST_CASE("i-quant sign patterns and IQ4_NL values equal ggml's") {
  using namespace edgellm;
  CHECK(fnv1a_of(ksigns_iq2xs, 1) == 0xf19ba8f8c3292ba5ull);
  for (uint32_t i = 0; i < 128; ++i) {
    int bits = 0;
    for (uint32_t b = ksigns_iq2xs[i]; b; b >>= 1) bits += b & 1;
    CHECK(bits % 2 == 0);                 // an even number of negative weights
    CHECK((ksigns_iq2xs[i] & 0x7f) == i);  // the 7 stored bits as they are
  }
  uint64_t h = 0xcbf29ce484222325ull;
  for (int8_t v : kvalues_iq4nl) {
    h ^= uint8_t(v);
    h *= 0x100000001b3ull;
  }
  CHECK(h == 0x55d06d2d8fa0f75ull);
  for (int i = 0; i < 8; ++i) CHECK(kmask_iq2xs[i] == (1 << i));
}
