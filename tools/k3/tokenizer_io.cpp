#include "tokenizer_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "k3/error.h"

namespace k3::cli {

namespace {

std::string read_all(std::FILE* f, const std::string& name) {
  std::string data;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.append(buf, n);
  check(!std::ferror(f), "cannot read ", name, ": ", std::strerror(errno));
  return data;
}

}  // namespace

std::string read_stdin() { return read_all(stdin, "standard input"); }

std::string read_input_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  check(f != nullptr, "cannot open ", path, ": ", std::strerror(errno));
  try {
    std::string data = read_all(f, path);
    std::fclose(f);
    return data;
  } catch (...) {
    std::fclose(f);
    throw;
  }
}

std::vector<int32_t> parse_id_list(const std::string& text, const std::string& what) {
  std::string body = text;
  size_t open = body.find_first_not_of(" \t\r\n");
  if (open != std::string::npos && body[open] == '[') {
    size_t close = body.find_last_not_of(" \t\r\n");
    check(body[close] == ']', what, ": '[' without a closing ']'");
    body = body.substr(open + 1, close - open - 1);
  }
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < body.size()) {
    if (std::strchr(" \t\r\n,", body[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    if (body[j] == '-') ++j;
    while (j < body.size() && body[j] >= '0' && body[j] <= '9') ++j;
    bool digits = j > i + (body[i] == '-' ? 1 : 0);
    bool ends = j == body.size() || std::strchr(" \t\r\n,", body[j]);
    std::string item = body.substr(i, j - i);
    check(digits && ends, what, ": '", body.substr(i, std::min<size_t>(20, body.size() - i)),
          "' is not a token id (expected integers separated by spaces or commas)");
    check(item.size() <= 11, what, ": token id ", item, " is out of range");
    long long v = std::stoll(item);
    check(v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(),
          what, ": token id ", item, " is out of range");
    ids.push_back(static_cast<int32_t>(v));
    i = j;
  }
  check(!ids.empty(), what, ": no token ids given");
  return ids;
}

}  // namespace k3::cli
