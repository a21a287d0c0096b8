// Line input for interactive commands, with Ctrl-C (SIGINT) turned into a flag instead of the
// end of the process: generation polls interrupted() and stops; a read at the prompt returns
// ReadStatus::interrupted. A line ending in a backslash continues on the next line.
#pragma once

#include <string>

namespace k3::cli {

// Installs the SIGINT handler (no SA_RESTART, so a blocked read returns).
void install_interrupt_handler();
bool interrupted();  // Ctrl-C pressed since the last clear
void clear_interrupted();

enum class ReadStatus { line, eof, interrupted };

class LineReader {
 public:
  explicit LineReader(int fd = 0) : fd_(fd) {}
  // Prints `prompt` (and `more` before continuation lines) when the input is a terminal.
  ReadStatus read(std::string& out, const char* prompt, const char* more);

 private:
  ReadStatus read_physical(std::string& line);
  int fd_;
  std::string buf_;
  bool eof_ = false;
};

}  // namespace k3::cli
