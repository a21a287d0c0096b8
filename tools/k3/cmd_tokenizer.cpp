// k3 tokenizer train: learn a byte-level BPE tokenizer in K3's format from text files.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "k3/error.h"
#include "k3/tokenizer_train.h"

namespace k3::cli {
namespace {

namespace fs = std::filesystem;

// The files named by --input, a directory standing for every regular file under it (sorted).
std::vector<std::string> input_files(const std::vector<std::string>& inputs) {
  check(!inputs.empty(), "missing required option --input (see k3 tokenizer train --help)");
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::recursive_directory_iterator(in, ec)) {
        if (e.is_regular_file()) found.push_back(e.path().string());
      }
      check(!ec, "cannot list input directory ", in, ": ", ec.message());
      check(!found.empty(), "input directory ", in, " holds no files");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      check(fs::is_regular_file(in, ec), "input ", in, " is not a readable file or directory");
      files.push_back(in);
    }
  }
  return files;
}

// Feeds one file in blocks cut after a line end, so a corpus never sits in memory twice.
int64_t feed_file(BpeTrainer& t, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot open input file ", path, ": ", std::strerror(errno));
  constexpr size_t kBlock = size_t{16} << 20;
  std::string buf, carry;
  int64_t bytes = 0;
  while (true) {
    buf.assign(carry);
    const size_t have = buf.size();
    buf.resize(have + kBlock);
    in.read(buf.data() + have, static_cast<std::streamsize>(kBlock));
    const auto got = static_cast<size_t>(in.gcount());
    buf.resize(have + got);
    bytes += static_cast<int64_t>(got);
    check(!in.bad(), "error reading input file ", path);
    if (got == 0) break;
    const size_t cut = buf.rfind('\n');
    const size_t keep = (cut == std::string::npos || in.eof()) ? buf.size() : cut + 1;
    t.add_text(std::string_view(buf).substr(0, keep));
    carry = buf.substr(keep);
    if (in.eof()) break;
  }
  if (!carry.empty()) t.add_text(carry);
  return bytes;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int train(int argc, char** argv) {
  Args args(
      "tokenizer train", "-i FILE|DIR [-i ...] -o DIR [--vocab-size N] [options]",
      "Learn a byte-level BPE tokenizer from text with K3's pre-tokenizer, and write it in\n"
      "K3's format: DIR/tiktoken.model (256 byte tokens, then the merges in the order\n"
      "learned; rank = id) and DIR/tokenizer_config.json (K3's 256 special tokens at ids\n"
      "ranks .. ranks+255). Any k3 command loads it with -m DIR. Ill-formed UTF-8 bytes in\n"
      "the input are skipped.",
      {
          {"input", "i", "FILE|DIR", "text to learn from (repeatable; a directory: its files)", ""},
          {"output", "o", "DIR", "where to write the two tokenizer files", ""},
          Option("vocab-size", "", "N",
                 "ids in all, the 256 specials included (config.json vocab_size)", "8192")
              .range(512, int64_t{1} << 30),
          Option("min-frequency", "", "N", "stop early when the best pair is rarer", "2").range(1),
          {"quiet", "q", "", "print only the summary line", ""},
      });
  if (!args.parse(argc, argv)) return 0;
  const std::vector<std::string> files = input_files(args.all("input"));
  const std::string out = args.str("output");
  const bool quiet = args.has("quiet");
  std::error_code ec;  // fail on an unwritable output before the (long) counting
  fs::create_directories(out, ec);
  check(!ec && fs::is_directory(out), "cannot create output directory ", out,
        ec ? ": " + ec.message() : "");
  const auto t0 = std::chrono::steady_clock::now();
  BpeTrainer trainer;
  for (const std::string& f : files) {
    const int64_t n = feed_file(trainer, f);
    if (!quiet) std::fprintf(stderr, "counted %s (%.1f MB)\n", f.c_str(), double(n) / 1e6);
  }
  const double count_s = seconds_since(t0);
  BpeTrainOptions opt;
  opt.vocab_size = args.integer("vocab-size");
  opt.min_frequency = args.integer("min-frequency");
  if (!quiet && isatty(fileno(stderr))) {
    opt.progress = [](int64_t have, int64_t want) {
      std::fprintf(stderr, "\rmerging: %lld / %lld ranks", static_cast<long long>(have),
                   static_cast<long long>(want));
    };
  }
  const BpeTrainStats st = trainer.train(opt);
  if (!quiet) std::fprintf(stderr, "\n");
  trainer.write(out);
  const double total_s = seconds_since(t0);
  std::printf(
      "wrote %s: %lld ranks + 256 specials = vocab_size %lld; %lld merges from %.1f MB "
      "(%lld pre-tokens, %lld distinct, %lld ill-formed bytes skipped); %.3f tokens/byte on "
      "the input; %.1f s (counting %.1f s)\n",
      out.c_str(), static_cast<long long>(st.ranks), static_cast<long long>(st.vocab_size),
      static_cast<long long>(st.merges), double(st.bytes) / 1e6,
      static_cast<long long>(st.pretokens), static_cast<long long>(st.unique_words),
      static_cast<long long>(st.invalid_bytes),
      st.bytes ? double(st.corpus_tokens) / double(st.bytes) : 0.0, total_s, count_s);
  if (st.vocab_size < opt.vocab_size) {
    std::printf("note: the input ran out of pairs seen %lld+ times before vocab_size %lld\n",
                static_cast<long long>(opt.min_frequency), static_cast<long long>(opt.vocab_size));
  }
  return 0;
}

}  // namespace

int cmd_tokenizer(int argc, char** argv) {
  const std::string sub = argc >= 2 ? argv[1] : "";
  if (sub == "train") return train(argc - 1, argv + 1);
  if (sub.empty() || sub == "--help" || sub == "-h" || sub == "help") {
    std::printf(
        "usage: k3 tokenizer <subcommand> [options]\n\n"
        "subcommands:\n"
        "  train   learn a byte-level BPE tokenizer in K3's format from text files\n\n"
        "Run 'k3 tokenizer train --help' for its options.\n");
    return sub.empty() ? 2 : 0;
  }
  fail("unknown subcommand '", sub, "': expected train (see k3 tokenizer --help)");
}

}  // namespace k3::cli
