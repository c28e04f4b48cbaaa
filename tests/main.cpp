// The only file that defines doctest's main. A run in which nothing failed but some case could not
// run (EDGELLM_SKIP, test_util.hpp) exits with kSkipReturnCode, which ctest reports as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "test_util.hpp"

int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  if (ctx.shouldExit() || rc != 0) return rc;
  return edgellm_test::skipped_cases() > 0 ? edgellm_test::kSkipReturnCode : 0;
}
