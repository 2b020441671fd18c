#include "reference/core/files.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "reference/core/error.hpp"

namespace convlab {

std::optional<std::string> try_read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

std::string read_file(const std::filesystem::path& path, std::string_view what) {
  errno = 0;
  if (auto text = try_read_file(path)) return *std::move(text);
  const std::string why = errno != 0 ? std::strerror(errno) : "it cannot be opened";
  throw Error("cannot read " + std::string(what) + " " + path.string() + ": " + why);
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace convlab
