// Compiled (not run) by the include_only_x86_levels_compile test for a target this machine may not
// have (-march=icelake-server: AVX-512 VNNI with GFNI and VBMI): kernels() takes the address of every
// kernel of the build's level, so each is compiled with that level's intrinsics. (The plain builds
// of include_only_gxx / include_only_clang compile every dispatch level the same way.)
#include <cstdio>

#include "edgellm/kernels/select.hpp"

int main() {
  std::printf("%s", edgellm::describe_kernels(edgellm::kernels()).c_str());
  return 0;
}
