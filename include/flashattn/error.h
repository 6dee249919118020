// The one exception type of the API. Every refusal names the argument at fault,
// what was given and what is allowed; nothing has been written when it is thrown.
#pragma once

#include <stdexcept>
#include <string>

namespace flashattn {

enum class ErrorKind {
  value,        // a size, a shape, an option out of range (Python: ValueError)
  type,         // a dtype that is not allowed here (Python: TypeError)
  unsupported,  // valid by the contract but not on this backend/build (Python: NotImplementedError)
  runtime,      // a failure while running (CUDA error, out of memory) (Python: RuntimeError)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string argument, const std::string& message)
      : std::runtime_error(format(argument, message)), kind_(kind), argument_(std::move(argument)) {}

  ErrorKind kind() const noexcept { return kind_; }
  // The name of the argument at fault ("q", "cu_seqlens_k", "window", ...); empty when none.
  const std::string& argument() const noexcept { return argument_; }

 private:
  static std::string format(const std::string& argument, const std::string& message) {
    return argument.empty() ? "flashattn: " + message
                            : "flashattn: argument '" + argument + "': " + message;
  }
  ErrorKind kind_;
  std::string argument_;
};

}  // namespace flashattn
