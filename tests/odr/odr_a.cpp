// ODR check, part 1: this and odr_b.cpp both include everything; they must link together.
#include <edgellm.hpp>

int odr_b_value();

int main() {
  const int a = static_cast<int>(edgellm::dtype_block_size(edgellm::DType::Q4_K));
  return (a == odr_b_value()) ? 0 : 1;
}
