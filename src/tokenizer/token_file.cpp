#include "k3/token_file.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace k3 {
namespace {

constexpr char kMagic[8] = {'K', '3', 'T', 'O', 'K', 1, 0, 0};
constexpr size_t kHeader = 8 + 4 + 4 + 8 + 8;

template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i)
    b[i] = static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
  out.append(b, sizeof(T));
}

template <typename T>
T get(const unsigned char* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t{p[i]} << (8 * i);
  return static_cast<T>(v);
}

}  // namespace

uint64_t tokenizer_fingerprint(const Tokenizer& tok) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over (length, bytes) of every token
  auto mix = [&h](unsigned char c) { h = (h ^ c) * 1099511628211ull; };
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    const std::string_view piece = tok.token_to_piece(id);
    for (int i = 0; i < 4; ++i) mix(static_cast<unsigned char>(piece.size() >> (8 * i)));
    for (char c : piece) mix(static_cast<unsigned char>(c));
  }
  return h;
}

void write_token_file(const std::string& path, const Tokenizer& tok, std::span<const int32_t> ids) {
  std::string out(kMagic, sizeof kMagic);
  put<uint32_t>(out, static_cast<uint32_t>(tok.n_vocab()));
  put<uint32_t>(out, 0);
  put<uint64_t>(out, tokenizer_fingerprint(tok));
  put<uint64_t>(out, ids.size());
  out.reserve(out.size() + 4 * ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    check(ids[i] >= 0 && ids[i] < tok.n_vocab(), path, ": id ", ids[i], " at position ", i,
          " is outside the tokenizer's ", tok.n_vocab(), " ids");
    put<uint32_t>(out, static_cast<uint32_t>(ids[i]));
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    f.close();
    check(f.good(), "cannot write ", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  check(!ec, "cannot rename ", tmp, " to ", path, ": ", ec.message());
}

bool is_token_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char head[sizeof kMagic] = {};
  f.read(head, sizeof head);
  return f.gcount() == sizeof head && std::memcmp(head, kMagic, sizeof kMagic) == 0;
}

std::vector<int32_t> read_token_file(const std::string& path, const Tokenizer& tok) {
  std::ifstream f(path, std::ios::binary);
  check(f.good(), "cannot read ", path);
  unsigned char h[kHeader];
  f.read(reinterpret_cast<char*>(h), kHeader);
  check(f.gcount() == static_cast<std::streamsize>(kHeader) && std::memcmp(h, kMagic, 8) == 0, path,
        " is not a k3 token file (no K3TOK header)");
  const uint32_t n_vocab = get<uint32_t>(h + 8);
  const uint64_t fingerprint = get<uint64_t>(h + 16), count = get<uint64_t>(h + 24);
  check(
      n_vocab == static_cast<uint32_t>(tok.n_vocab()) && fingerprint == tokenizer_fingerprint(tok),
      path, " was tokenised with another tokenizer (", n_vocab, " ids) than this model's (",
      tok.n_vocab(), " ids): tokenise the text again");
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  check(!ec && count <= (size - kHeader) / 4 && size - kHeader == 4 * count, path,
        ": the header announces ", count, " ids but the file holds ", ec ? 0 : (size - kHeader) / 4,
        " (truncated or corrupt)");
  std::vector<unsigned char> raw(static_cast<size_t>(4 * count));
  f.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
  check(f.gcount() == static_cast<std::streamsize>(raw.size()), path, ": short read");
  std::vector<int32_t> ids(static_cast<size_t>(count));
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint32_t id = get<uint32_t>(&raw[4 * i]);
    check(id < n_vocab, path, ": id ", id, " at position ", i, " is outside the ", n_vocab, " ids");
    ids[i] = static_cast<int32_t>(id);
  }
  return ids;
}

}  // namespace k3
