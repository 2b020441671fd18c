/// @file
/// @brief The one exception type convlab reports problems with, and the stub helper.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace convlab {

/// A problem the user can fix (bad input, missing file, unimplemented stub).
/// The driver prints what() once and exits non-zero; the message says what to do next.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Thrown by a student stub that has not been written yet.
class NotImplemented : public Error {
 public:
  using Error::Error;
};

/// Throws NotImplemented naming the file to edit and the handout section to read.
/// Every stub in student/ calls this until the team replaces it.
[[noreturn]] void not_implemented(std::string_view what, std::string_view file,
                                  std::string_view handout);

}  // namespace convlab
