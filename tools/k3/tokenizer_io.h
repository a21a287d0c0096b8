// Input helpers shared by k3 tokenize and k3 detokenize.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace k3::cli {

std::string read_stdin();                              // all of standard input, as bytes
std::string read_input_file(const std::string& path);  // all of a file, as bytes
// Integers separated by spaces, commas or newlines, optionally inside one pair of [ ]. Ids are
// range-checked by the caller; this rejects non-integers and values beyond int32, naming `what`.
std::vector<int32_t> parse_id_list(const std::string& text, const std::string& what);

}  // namespace k3::cli
