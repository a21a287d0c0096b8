// Machine resources seen before a model is loaded: the bytes a checkpoint maps (the sum of its
// safetensors files) against the machine's memory, so `k3 run`, `chat` and `perplexity` can
// warn up front that a model bigger than RAM will page from disk.
#pragma once

#include <cstdint>
#include <string>

namespace k3::cli {

// The sum of the sizes of the *.safetensors files in `dir` (or in the directory of `dir` when
// it names a file); 0 when there are none.
uint64_t model_mapped_bytes(const std::string& dir);

// The memory the machine can hold mapped pages in: MemTotal from /proc/meminfo, or $K3_MEM_BYTES
// when set (tests); 0 when unknown.
uint64_t machine_memory_bytes();

// Prints one warning line on stderr when the model maps more than the machine's memory.
void warn_if_model_exceeds_memory(const std::string& dir);

}  // namespace k3::cli
