// k3 tokenize: text -> token ids with the model's tokenizer (tiktoken.model +
// tokenizer_config.json in the model directory).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "common_options.h"
#include "k3/error.h"
#include "k3/token_file.h"
#include "k3/tokenizer.h"
#include "model_dir.h"
#include "tokenizer_io.h"

namespace k3::cli {

int cmd_tokenize(int argc, char** argv) {
  Args args("tokenize",
            "[-m DIR] [-p TEXT | -f FILE | < stdin] [--json] [--no-special] [-o FILE.k3tok]",
            "Print the token ids of a text, encoded exactly as K3's Hugging Face tokenizer does.\n"
            "Special-token texts such as <|end_of_msg|> become their ids unless --no-special.\n"
            "The text must be valid UTF-8. With -o, write the ids as a pre-tokenised file that\n"
            "`k3 train --data` reads in place of the text (encoded as k3 train encodes text:\n"
            "special-token texts as ordinary text), and print a one-line summary.",
            {
                model_option(),
                prompt_option("the text to encode"),
                file_option("read the text from FILE (default: standard input)"),
                {"json", "", "", "print a JSON array instead of space-separated ids", ""},
                {"no-special", "", "", "encode special-token texts as ordinary text", ""},
                {"output", "o", "FILE", "write a .k3tok token file for k3 train instead", ""},
            });
  if (!args.parse(argc, argv)) return 0;
  check(!(args.has("prompt") && args.has("file")), "give the text with -p or -f, not both");
  Tokenizer tok = Tokenizer::load(resolve_model_dir(args, true));
  std::string text = args.has("prompt") ? args.str("prompt")
                     : args.has("file") ? read_input_file(args.str("file"))
                                        : read_stdin();
  if (args.given("output")) {
    check(!args.has("json"), "--json has no effect with -o");
    const std::vector<int32_t> ids = tok.encode(text, false);
    write_token_file(args.str("output"), tok, ids);
    std::fprintf(stderr, "k3 tokenize: wrote %s (%zu tokens from %zu bytes)\n",
                 args.str("output").c_str(), ids.size(), text.size());
    return 0;
  }
  std::vector<int32_t> ids = tok.encode(text, !args.has("no-special"));
  std::string out;
  if (args.has("json")) {
    out = nlohmann::json(ids).dump();
  } else {
    for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
  }
  out += "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace k3::cli
