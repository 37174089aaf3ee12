// A shared library opened with dlopen at first use rather than linked, and
// its functions looked up by name: the GPU libraries (NCCL, cuBLAS) stay out
// of a binary's start, so CPU jobs neither need them nor pay for mapping
// and relocating them.
#pragma once

#include <string>
#include <vector>

namespace shardtrain {

class SharedLibrary {
 public:
  // Opens the first of `paths` (sonames or full paths) the dynamic loader
  // finds, RTLD_NOW | RTLD_GLOBAL; kept open for the life of the process.
  // Otherwise error() says what each attempt answered.
  explicit SharedLibrary(const std::vector<std::string>& paths);

  bool loaded() const { return handle_ != nullptr; }
  // What went wrong first (not found, or the first missing function); empty
  // while nothing has.
  const std::string& error() const { return error_; }
  // Where the library was loaded from (dladdr), else its name.
  const std::string& path() const { return path_; }

  // Sets `fn` to the function `name`; a missing one is recorded in error()
  // when `required`.
  template <class F>
  bool resolve(const char* name, F& fn, bool required = true) {
    void* sym = find(name, required);
    if (sym != nullptr) fn = reinterpret_cast<F>(sym);
    return sym != nullptr;
  }

 private:
  void* find(const char* name, bool required);

  void* handle_ = nullptr;
  std::string error_, path_;
};

}  // namespace shardtrain
