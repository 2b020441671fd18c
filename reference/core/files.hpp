/// @file
/// @brief Reading a whole file, and the time stamps reports carry: written once for every
/// command.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace convlab {

/// The whole content of `path` (bytes as they are), or nullopt when it cannot be opened.
std::optional<std::string> try_read_file(const std::filesystem::path& path);

/// The whole content of `path`; throws Error("cannot read <what> <path>: <reason>") when it
/// cannot be opened.
std::string read_file(const std::filesystem::path& path, std::string_view what = "the file");

/// Now, in UTC, as ISO 8601 to the second: "2026-11-28T23:04:05Z".
std::string utc_now();

}  // namespace convlab
