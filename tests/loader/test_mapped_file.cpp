// MappedFile: a file of at least one huge page is read into 2 MB pages (K3_HUGEPAGES=0 maps it);
// either way the bytes are the file's, including a last partial page, and a small file is mapped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"

namespace k3 {
namespace {

std::string write_random_file(size_t bytes, std::vector<uint8_t>& content) {
  std::mt19937_64 rng(bytes);
  content.resize(bytes);
  for (auto& b : content) b = static_cast<uint8_t>(rng());
  const std::string path = testing::TempDir() + "k3_mapped_" + std::to_string(getpid()) + "_" +
                           std::to_string(bytes) + ".bin";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(content.data()), static_cast<std::streamsize>(bytes));
  return path;
}

void expect_same_bytes(const std::string& path, const std::vector<uint8_t>& content) {
  const MappedFile f(path);
  ASSERT_EQ(f.size(), content.size());
  for (size_t i = 0; i < content.size(); ++i)
    ASSERT_EQ(f.data()[i], content[i]) << path << " byte " << i;
}

TEST(MappedFile, HugePagesOrMappedHoldTheFileBytes) {
  for (size_t bytes : {size_t{1}, size_t{4097}, (size_t{2} << 20) + 12345, size_t{5} << 20}) {
    std::vector<uint8_t> content;
    const std::string path = write_random_file(bytes, content);
    unsetenv("K3_HUGEPAGES");
    expect_same_bytes(path, content);
    setenv("K3_HUGEPAGES", "0", 1);
    expect_same_bytes(path, content);
    unsetenv("K3_HUGEPAGES");
    std::remove(path.c_str());
  }
}

TEST(MappedFile, MissingFileNamesThePath) {
  try {
    const MappedFile f("/nonexistent/k3_weights.bin");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/k3_weights.bin"), std::string::npos);
  }
}

}  // namespace
}  // namespace k3
