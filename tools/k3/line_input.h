// Line input for interactive commands, with Ctrl-C (SIGINT) turned into a flag instead of the
// end of the process: generation polls interrupted() and stops; a read at the prompt returns
// ReadStatus::interrupted. A line ending in a backslash continues on the next line.
//
// When standard input and output are both terminals, lines are read with libedit (arrows, line
// editing, history kept in a file across sessions); Ctrl-C there clears the line being typed.
// Otherwise (piped input) lines are read plainly from the file descriptor.
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
  explicit LineReader(int fd = 0);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Prints `prompt` (and `more` before continuation lines) when the input is a terminal.
  ReadStatus read(std::string& out, const char* prompt, const char* more);
  // True when lines are read with libedit (Ctrl-C clears the line instead of ending input).
  bool editing() const { return editing_; }

 private:
  ReadStatus read_physical(std::string& line);
  ReadStatus read_edited(std::string& line, const char* prompt);
  int fd_;
  bool editing_ = false;
  std::string history_file_;  // empty: no history file
  std::string buf_;
  bool eof_ = false;
};

}  // namespace k3::cli
