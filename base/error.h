// Errors raised by ringx's torch-free core.
//
// One enforce-style macro family throws with file:line, the failed condition and
// the operand values. Typed errors let callers tell a timeout or a lost peer from
// bad input without parsing messages. The c10d layer turns them into Python
// RuntimeError (TimeoutError and PeerError keep their class name in the text).
#pragma once

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace ringx {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The caller passed something that cannot work (wrong dtype, sizes, ranks).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A deadline passed while waiting for a peer.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// A peer closed its connection, reset it, or reported a failure of its own.
class PeerError : public Error {
 public:
  using Error::Error;
  PeerError(const std::string& what, int peer) : Error(what), peer_(peer) {}
  // The rank whose connection failed, or -1 where the error is not about one connection.
  int peer() const { return peer_; }

 private:
  int peer_ = -1;
};

// A system call failed.
class IoError : public Error {
 public:
  using Error::Error;
};

namespace detail {
inline void appendAll(std::ostringstream&) {}
template <typename T, typename... Rest>
void appendAll(std::ostringstream& out, const T& value, const Rest&... rest) {
  out << value;
  appendAll(out, rest...);
}
}  // namespace detail

// Concatenates anything that can be streamed into one string.
template <typename... Parts>
std::string strCat(const Parts&... parts) {
  std::ostringstream out;
  detail::appendAll(out, parts...);
  return out.str();
}

}  // namespace ringx

#define RINGX_THROW(ErrorType, ...) \
  throw ErrorType(::ringx::strCat(__VA_ARGS__, " [", __FILE__, ":", __LINE__, "]"))

// Throws PeerError about the connection to rank `peer`, with the source location.
#define RINGX_THROW_PEER(peer, ...) \
  throw ::ringx::PeerError(::ringx::strCat(__VA_ARGS__, " [", __FILE__, ":", __LINE__, "]"), (peer))

// Throws InvalidArgument (or the given type) when `cond` is false.
#define RINGX_CHECK(cond, ...)                            \
  do {                                                    \
    if (!(cond)) {                                        \
      RINGX_THROW(::ringx::InvalidArgument, __VA_ARGS__); \
    }                                                     \
  } while (0)

// Internal invariants: names the condition and both operand values.
#define RINGX_ENFORCE_OP(a, b, op)                                                                 \
  do {                                                                                             \
    const auto& ringxA_ = (a);                                                                     \
    const auto& ringxB_ = (b);                                                                     \
    if (!(ringxA_ op ringxB_)) {                                                                   \
      RINGX_THROW(::ringx::Error, "ringx internal check failed: " #a " " #op " " #b " (", ringxA_, \
                  " vs ", ringxB_, ")");                                                           \
    }                                                                                              \
  } while (0)
#define RINGX_ENFORCE_EQ(a, b) RINGX_ENFORCE_OP(a, b, ==)
#define RINGX_ENFORCE_LE(a, b) RINGX_ENFORCE_OP(a, b, <=)
#define RINGX_ENFORCE_LT(a, b) RINGX_ENFORCE_OP(a, b, <)
#define RINGX_ENFORCE(cond)                                               \
  do {                                                                    \
    if (!(cond)) {                                                        \
      RINGX_THROW(::ringx::Error, "ringx internal check failed: " #cond); \
    }                                                                     \
  } while (0)

// Throws IoError with errno's text when a system call returned -1.
#define RINGX_SYSCHECK(expr, what)                                           \
  do {                                                                       \
    if ((expr) == -1) {                                                      \
      int ringxErrno_ = errno;                                               \
      RINGX_THROW(::ringx::IoError, what, ": ", std::strerror(ringxErrno_)); \
    }                                                                        \
  } while (0)
