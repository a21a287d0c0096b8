// The SIMD parts of the absorbed MLA attention (one query of one head over a tile of cached
// latent rows), for AVX-512 (mla_absorbed_avx512.cpp, built with its own flags); mla.cpp picks
// them at run time. Raw pointers only: this header defines nothing inline (see core/cpu_isa.h).
#pragma once

#include <cstdint>

namespace k3 {

struct MlaAbsorbedKernels {
  // p[j] = (qt · rows[j][0, Dc) + qr · rows[j][Dc, Dc + Dr)) * scale for j < m.
  // Needs Dc % 16 == 0 and Dr % 16 == 0.
  void (*scores)(const float* qt, const float* qr, const float* const* rows, int64_t m, int64_t Dc,
                 int64_t Dr, float scale, float* p);
  // ob[c] = ob[c] * rescale + Σ_j p[j] · rows[j][c] (j in order) for c < Dc; Dc % 16 == 0.
  void (*accumulate)(const float* p, const float* const* rows, int64_t m, int64_t Dc, float rescale,
                     float* ob);
};

namespace avx512 {
extern const MlaAbsorbedKernels kMlaAbsorbedKernels;
}

}  // namespace k3
