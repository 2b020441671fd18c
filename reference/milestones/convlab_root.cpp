// convlab_root() on its own: the one file built with this tree's path, so that every other file
// compiles the same in any copy of the tree (the student kit, the grader's framework cache) and
// ccache serves it from one build to the others.
#include <cstdlib>

#include "reference/milestones/milestone.hpp"

namespace convlab {

namespace fs = std::filesystem;

fs::path convlab_root() {
  if (const char* env = std::getenv("CONVLAB_ROOT"); env != nullptr && *env != '\0') return env;
  // An installed convlab (cmake --install) reads its data from PREFIX/share/convlab, beside
  // PREFIX/bin; a build reads the tree it was built from.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / CONVLAB_INSTALL_DATA_DIR;
    if (fs::is_regular_file(installed / "milestones/m1/checks.json", ec)) return installed;
  }
  return CONVLAB_DEFAULT_ROOT;
}

}  // namespace convlab
