// The cost model's view of router balancing: the library's code (k3/router_balance.h), under
// the names the cost tables and the simulation use.
#pragma once

#include "k3/router_balance.h"

namespace k3::cost {

using balance::dual_objective;
using balance::loss_free_update;
using balance::max_violation;
using balance::qb_bias_exact;
using balance::qb_bias_histogram;
using balance::qb_range_hi;
using balance::qb_range_lo;
using balance::qb_step;
using balance::QbConvention;
using balance::route;
using balance::Routing;
using balance::Scores;

}  // namespace k3::cost
