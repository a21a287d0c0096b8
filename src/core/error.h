#include "k3/error.h"  // IWYU pragma: export (k3::Error, cat, fail, check live in the public API)
