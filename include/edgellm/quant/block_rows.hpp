// The block walk of the reference row (de)quantizers (quant/ref_*.hpp, quantize.hpp): a row of k
// values is k / kBlock blocks, each written from (or into) its own kBlock floats.
#pragma once
#include <cstdint>

#include "edgellm/config.hpp"
#include "edgellm/quant/exact_fp.hpp"

EDGELLM_EXACT_FP_BEGIN
namespace edgellm {
namespace detail {

// write(x[i], y + kBlock * i) for each block i of the row (k a multiple of kBlock).
template <int kBlock, class Block, class Write>
inline void dequantize_blocks(const Block* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k, Write write) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % kBlock == 0);
  for (int64_t i = 0; i < k / kBlock; ++i, y += kBlock) write(x[i], y);
}

// quantize(x + kBlock * i, y[i]) for each block i of the row (k a multiple of kBlock).
template <int kBlock, class Block, class Quantize>
inline void quantize_blocks(const float* EDGELLM_RESTRICT x, Block* EDGELLM_RESTRICT y, int64_t k, Quantize quantize) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % kBlock == 0);
  for (int64_t i = 0; i < k / kBlock; ++i, x += kBlock) quantize(x, y[i]);
}

}  // namespace detail
}  // namespace edgellm
EDGELLM_EXACT_FP_END
