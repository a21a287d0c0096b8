#include <omp.h>

#include <cstdlib>

#include "k3/k3.h"

namespace k3 {
namespace {
// K3_THREADS sets the default worker count before the first op runs.
const bool kEnvApplied = [] {
  if (const char* s = std::getenv("K3_THREADS")) {
    int n = std::atoi(s);
    if (n > 0) omp_set_num_threads(n);
  }
  return true;
}();
}  // namespace

void set_num_threads(int n) {
  if (n > 0) omp_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace k3
