// The figures of `k3 cost --plots DIR`, as SVG text (pure: the command writes the files).
//   capacity.svg        log-log attention memory per sequence vs context: all-MLA and the
//                       hybrid with 2- and 4-byte KDA states, crossovers marked [A2 FIG 24]
//   param_budget.svg    LatentMoE active parameter budget bars [A2 FIG 12]
//   macs.svg            attention-core MAC coefficients per cached position [A2 FIG 31, 33]
//   cache_scalars.svg   cached scalars per position for MHA/GQA/MQA/MLA/shared K=V [A2 FIG 32]
//   situ_gates.svg      gate branches sigma(a), a sigma(a), SiTU gate [A2 FIG 08]
//   situ_diag.svg       a = b values of SwiGLU and SiTU-GLU on a log axis [A2 FIG 10]
//   qb_maxvio.svg       MaxVio per step: exact QB, histogram QB, Loss-Free [A2 FIG 17]
#pragma once

#include <string>
#include <vector>

#include "cost/qb_sim.h"
#include "k3/hparams.h"

namespace k3::cost {

struct Figure {
  std::string file;  // "capacity.svg"
  std::string svg;
};

// `qb` may be null (QB simulation not run): then qb_maxvio.svg is left out. MoE-free configs
// get no parameter-budget figure.
std::vector<Figure> cost_figures(const HParams& hp, const QbSimResult* qb);

}  // namespace k3::cost
