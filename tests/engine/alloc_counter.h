// A count of every global operator new in this test binary (alloc_counter.cpp replaces the
// global operator new/delete), to show that hot paths do not allocate.
#pragma once

#include <cstdint>

namespace k3::test {

int64_t allocation_count();

}  // namespace k3::test
