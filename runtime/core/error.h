// shardtrain's one error type. An Error carries a message plus the context it
// was raised in ("reading data/train/part-00000.h5", "config key train.epochs"),
// outermost first, so the one-line message a user sees names the file, key,
// rank or collective at fault.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace shardtrain {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message) : std::runtime_error(message), message_(std::move(message)) {}

  // Prepends "context: " to the message, e.g. the file being read.
  Error& add_context(const std::string& context) {
    message_ = context + ": " + message_;
    return *this;
  }

  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

// Runs fn(); an Error escaping from it gains `context` in front of its message.
template <typename Fn>
decltype(auto) with_context(const std::string& context, Fn&& fn) {
  try {
    return std::forward<Fn>(fn)();
  } catch (Error& e) {
    e.add_context(context);
    throw;
  }
}

}  // namespace shardtrain

// ST_CHECK(cond, "fmt {}", args...) throws shardtrain::Error with the formatted
// message when cond is false. For conditions a user's input can violate; use
// ST_ASSERT for programming errors.
#define ST_CHECK(cond, ...)                                  \
  do {                                                       \
    if (!(cond)) [[unlikely]] {                              \
      throw ::shardtrain::Error(::fmt::format(__VA_ARGS__)); \
    }                                                        \
  } while (0)

// An internal invariant; the message names the source location.
#define ST_ASSERT(cond)                                                                                  \
  do {                                                                                                   \
    if (!(cond)) [[unlikely]] {                                                                          \
      throw ::shardtrain::Error(::fmt::format("internal error: {} ({}:{})", #cond, __FILE__, __LINE__)); \
    }                                                                                                    \
  } while (0)
