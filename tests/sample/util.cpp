#include "sample/util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "common/tiny_model.h"

namespace k3::test {
namespace fs = std::filesystem;

std::string tokenizer_dir() { return std::string(K3_SOURCE_DIR) + "/tests/data/tokenizer"; }

const std::string& tiny_model_dir() {
  static const TempDir dir;
  static const std::string path = make_tiny_chat_model(dir);
  return path;
}

const Model& tiny_model() {
  static const std::unique_ptr<Model> model = Model::load(tiny_model_dir());
  return *model;
}

const Tokenizer& tiny_tokenizer() {
  static const Tokenizer tok = Tokenizer::load(tiny_model_dir());
  return tok;
}

}  // namespace k3::test
