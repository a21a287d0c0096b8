#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "core/error.h"

namespace k3 {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

// MemAvailable from /proc/meminfo in bytes (0 when unknown).
size_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  while (in >> key >> kb) {
    if (key == "MemAvailable:") return kb * 1024;
    in.ignore(256, '\n');
  }
  return 0;
}

// A lone token's GEMV streams every weight once per step, and on 4 KB pages each 4 KB of it
// costs a TLB miss (a nested page walk under a hypervisor): K3-small decode is ~7% faster with
// the weights on 2 MB pages. Files of at least one huge page that fit in half the available
// memory are read into such pages; K3_HUGEPAGES=0 maps them instead (shared page cache).
bool want_huge_pages(size_t size) {
  const char* env = std::getenv("K3_HUGEPAGES");
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  return size >= kHugePage && size <= available_memory() / 2;
}

// The file read into anonymous memory advised for transparent huge pages, or nullptr when that
// fails (the caller maps the file instead).
uint8_t* read_into_huge_pages(int fd, size_t size, size_t& mapped) {
  mapped = (size + kHugePage - 1) / kHugePage * kHugePage;
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  ::madvise(p, mapped, MADV_HUGEPAGE);
  auto* out = static_cast<uint8_t*>(p);
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::pread(fd, out + done, size - done, static_cast<off_t>(done));
    if (n <= 0) {
      ::munmap(p, mapped);
      return nullptr;
    }
    done += static_cast<size_t>(n);
  }
  ::mprotect(p, mapped, PROT_READ);
  return out;
}

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  check(fd >= 0, "cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail("cannot stat ", path, ": ", std::strerror(errno));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0 && want_huge_pages(size_)) {
    data_ = read_into_huge_pages(fd, size_, mapped_);
  }
  if (size_ > 0 && data_ == nullptr) {
    mapped_ = size_;
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      fail("cannot mmap ", path, ": ", std::strerror(errno));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), mapped_);
}

}  // namespace k3
