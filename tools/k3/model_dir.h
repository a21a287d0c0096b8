// Where a command finds its model: -m DIR when given, else $K3_MODEL, else the bundled default
// model models/default, looked up from the current directory and then from the directory of
// the k3 binary upwards (so build/bin/k3 finds <repo>/models/default from anywhere).
#pragma once

#include <string>

#include "args.h"

namespace k3::cli {

// The option every model-running command declares: -m, --model DIR.
Option model_option();
// Throws k3::Error with how to make the default model when none is found.
std::string resolve_model_dir(const Args& args);

}  // namespace k3::cli
