// k3 detokenize: token ids -> text, with U+FFFD for bytes that do not form UTF-8 (as tiktoken).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "k3/error.h"
#include "k3/tokenizer.h"
#include "model_dir.h"
#include "tokenizer_io.h"

namespace k3::cli {

int cmd_detokenize(int argc, char** argv) {
  Args args(
      "detokenize", "[-m DIR] [--ids 1,2,3 | < stdin] [--json]",
      "Print the text of token ids. Ids on standard input may be separated by spaces,\n"
      "commas or newlines, optionally inside [ ] (the output of k3 tokenize --json).\n"
      "The text is printed as is, without an added newline.",
      {
          model_option(),
          {"ids", "", "LIST", "comma-separated token ids (default: read from standard input)", ""},
          {"json", "", "", "print the text as a JSON string (with a newline)", ""},
      });
  if (!args.parse(argc, argv)) return 0;
  Tokenizer tok = Tokenizer::load(resolve_model_dir(args, true));
  std::vector<int32_t> ids = args.has("ids") ? parse_id_list(args.str("ids"), "--ids")
                                             : parse_id_list(read_stdin(), "stdin");
  for (size_t i = 0; i < ids.size(); ++i) {
    check(ids[i] >= 0 && ids[i] < tok.n_vocab(), "token id ", ids[i], " (position ", i,
          ") is outside the vocabulary 0..", tok.n_vocab() - 1);
  }
  std::string text = tok.decode(ids);
  if (args.has("json")) text = nlohmann::json(text).dump() + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace k3::cli
