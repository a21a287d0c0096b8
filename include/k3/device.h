// Where the engine's step runs when EngineOptions::device is left empty: the device set here
// (the CLI's --device), else the K3_DEVICE environment variable, else "cpu".
//
//   if (k3::cuda_device_available()) k3::set_default_device("cuda");
#pragma once

#include <string>

namespace k3 {

// True when this build has the CUDA backend and a CUDA device is present.
bool cuda_device_available();

// "cpu" or "cuda". Throws k3::Error for another name, or for "cuda" when no CUDA device can be
// used (the message says whether the build or the machine lacks it).
void set_default_device(const std::string& name);

// The device an Engine with an empty EngineOptions::device uses.
std::string default_device();

}  // namespace k3
