#include "runtime/core/shared_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace shardtrain {

SharedLibrary::SharedLibrary(const std::vector<std::string>& paths) {
  std::string tried;
  for (const std::string& p : paths) {
    handle_ = dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle_ != nullptr) {
      path_ = p;
      return;
    }
    const char* why = dlerror();
    tried += fmt::format("{}{}", tried.empty() ? "" : "; ", why ? why : p + ": dlopen failed");
  }
  error_ = tried.empty() ? "no library to open" : tried;
}

void* SharedLibrary::find(const char* name, bool required) {
  if (handle_ == nullptr) return nullptr;
  dlerror();
  void* sym = dlsym(handle_, name);
  if (sym == nullptr) {
    if (required && error_.empty()) {
      const char* why = dlerror();
      error_ = fmt::format("{} lacks {}: {}", path_, name, why ? why : "not found");
    }
    return nullptr;
  }
  Dl_info info{};
  if (path_.find('/') == std::string::npos && dladdr(sym, &info) != 0 && info.dli_fname != nullptr)
    path_ = info.dli_fname;
  return sym;
}

}  // namespace shardtrain
