#include "tokenizer/fixture.h"

#include <lzma.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace k3::test {

namespace fs = std::filesystem;

std::string fixture_dir() { return std::string(K3_SOURCE_DIR) + "/tests/data/tokenizer"; }

const Tokenizer& fixture_tokenizer() {
  static const Tokenizer tok = Tokenizer::load(fixture_dir());
  return tok;
}

namespace {

std::string xz_decompress(const std::string& packed) {
  lzma_stream s = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&s, UINT64_MAX, 0) != LZMA_OK) throw std::runtime_error("lzma init");
  std::string out;
  std::vector<uint8_t> buf(1 << 20);
  s.next_in = reinterpret_cast<const uint8_t*>(packed.data());
  s.avail_in = packed.size();
  lzma_ret ret = LZMA_OK;
  while (ret == LZMA_OK) {
    s.next_out = buf.data();
    s.avail_out = buf.size();
    ret = lzma_code(&s, LZMA_FINISH);
    out.append(reinterpret_cast<const char*>(buf.data()), buf.size() - s.avail_out);
  }
  lzma_end(&s);
  if (ret != LZMA_STREAM_END) throw std::runtime_error("cases.bin.xz: corrupt xz data");
  return out;
}

class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  uint32_t u32() {
    uint32_t v;
    need(4);
    std::memcpy(&v, data_.data() + pos_, 4);
    pos_ += 4;
    return v;
  }
  uint8_t u8() {
    need(1);
    return static_cast<uint8_t>(data_[pos_++]);
  }
  std::string bytes(size_t n) {
    need(n);
    pos_ += n;
    return data_.substr(pos_ - n, n);
  }
  std::vector<int32_t> ids(size_t n) {
    std::vector<int32_t> v(n);
    for (auto& x : v) x = static_cast<int32_t>(u32());
    return v;
  }
  bool done() const { return pos_ == data_.size(); }

 private:
  void need(size_t n) const {
    if (pos_ + n > data_.size()) throw std::runtime_error("cases.bin: truncated");
  }
  const std::string& data_;
  size_t pos_ = 0;
};

std::vector<FixtureCase> parse_cases(const std::string& data) {
  Reader r(data);
  if (r.bytes(8) != "K3TOKFX1") throw std::runtime_error("cases.bin: bad magic");
  struct Entry {
    CaseKind kind;
    uint32_t text_len;
    std::vector<uint32_t> list_lens;
  };
  std::vector<Entry> table(r.u32());
  for (Entry& e : table) {
    e.kind = static_cast<CaseKind>(r.u8());
    e.text_len = r.u32();
    e.list_lens.push_back(r.u32());
    if (e.kind == CaseKind::encode_both) e.list_lens.push_back(r.u32());
  }
  std::vector<FixtureCase> cases(table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    cases[i].kind = table[i].kind;
    cases[i].text = r.bytes(table[i].text_len);
  }
  for (size_t i = 0; i < table.size(); ++i) {
    cases[i].ids = r.ids(table[i].list_lens[0]);
    if (table[i].list_lens.size() > 1) cases[i].ids_no_special = r.ids(table[i].list_lens[1]);
  }
  if (!r.done()) throw std::runtime_error("cases.bin: trailing bytes");
  return cases;
}

std::string escaped(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string ids_around(const std::vector<int32_t>& ids, size_t at) {
  std::ostringstream os;
  size_t from = at >= 5 ? at - 5 : 0, to = std::min(ids.size(), at + 6);
  os << "[";
  for (size_t i = from; i < to; ++i) os << (i == at ? " >>" : " ") << ids[i];
  os << (to < ids.size() ? " ...]" : " ]");
  return os.str();
}

}  // namespace

const std::vector<FixtureCase>& fixture_cases() {
  static const std::vector<FixtureCase> cases =
      parse_cases(xz_decompress(read_file_bytes(fixture_dir() + "/cases.bin.xz")));
  return cases;
}

std::string describe_first_difference(const Tokenizer& tok, const std::string& text,
                                      const std::vector<int32_t>& expected,
                                      const std::vector<int32_t>& actual) {
  size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  if (i == expected.size() && i == actual.size()) return "";
  size_t byte = 0;  // text offset where the differing token starts (per the expected ids)
  for (size_t k = 0; k < i; ++k) byte += tok.token_to_piece(expected[k]).size();
  size_t from = byte >= 40 ? byte - 40 : 0;
  std::ostringstream os;
  os << "first difference at id index " << i << " of " << expected.size() << " expected / "
     << actual.size() << " actual, text byte offset " << byte << "\n  expected "
     << ids_around(expected, i) << "\n  actual   " << ids_around(actual, i) << "\n  text: \""
     << escaped(text.substr(from, byte - from)) << "<<HERE>>" << escaped(text.substr(byte, 40))
     << "\"";
  return os.str();
}

}  // namespace k3::test
