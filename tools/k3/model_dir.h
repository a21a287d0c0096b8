// Where a command finds its model: -m DIR when given, else $K3_MODEL, else the bundled default
// model models/default, looked up from the current directory and then from the directory of
// the k3 binary upwards (so build/bin/k3 finds <repo>/models/default from anywhere).
#pragma once

#include <string>

#include "args.h"

namespace k3::cli {

// The option every model-running command declares: -m, --model DIR.
Option model_option();
// -m (a directory, or a file in one), else $K3_MODEL, else models/default. Throws k3::Error
// naming a path that is not a model directory (holds no config.json), or saying how to make
// the default model when none is found. With tokenizer_only, a directory with tiktoken.model
// will do, and -m DIR is not checked (the tokenizer names the file it cannot open).
std::string resolve_model_dir(const Args& args, bool tokenizer_only = false);

}  // namespace k3::cli
