#include "reference/core/error.hpp"

#include <string>

namespace convlab {

void not_implemented(std::string_view what, std::string_view file, std::string_view handout) {
  throw NotImplemented(std::string(what) + " is not implemented yet: write it in " +
                       std::string(file) + " (see " + std::string(handout) + ")");
}

}  // namespace convlab
