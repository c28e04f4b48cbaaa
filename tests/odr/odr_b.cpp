// ODR check, part 2.
#include <edgellm.hpp>

int odr_b_value() { return static_cast<int>(edgellm::dtype_block_size(edgellm::DType::Q4_K)); }
