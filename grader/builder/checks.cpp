// The checks on a team's files: what their sources include, which headers their objects read,
// which symbols they call and define; and the compiler log cut to what a student needs.
#include <cxxabi.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <regex>
#include <system_error>

#include "grader/builder/build_detail.hpp"
#include "reference/conv/variant_table.hpp"

namespace convlab::grader::build_detail {
namespace fs = std::filesystem;

namespace {

// ---- Reading a source as the preprocessor does --------------------------------------------------

// Text as the preprocessor sees it after line splicing and comments, with each character's
// original line number.
struct Logical {
  std::string text;
  std::vector<int> line;
  std::vector<bool> in_raw;  // inside a raw string literal (which may span lines)
};

bool is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

Logical preprocess_text(std::string_view in) {
  // Phase 2: backslash-newline joins lines.
  Logical spliced;
  int line = 1;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\\') {
      std::size_t j = i + 1;
      if (j < in.size() && in[j] == '\r') ++j;
      if (j < in.size() && in[j] == '\n') {
        ++line;
        i = j;
        continue;
      }
    }
    spliced.text += in[i];
    spliced.line.push_back(line);
    if (in[i] == '\n') ++line;
  }
  // Phase 3: each comment becomes one space; string, character and raw string literals stay.
  Logical out;
  const std::string& s = spliced.text;
  const auto put = [&](std::size_t i, bool raw = false) {
    out.text += s[i];
    out.line.push_back(spliced.line[i]);
    out.in_raw.push_back(raw);
  };
  const auto space = [&](std::size_t i) {
    out.text += ' ';
    out.line.push_back(spliced.line[std::min(i, s.size() - 1)]);
    out.in_raw.push_back(false);
  };
  for (std::size_t i = 0; i < s.size();) {
    if (s.compare(i, 2, "//") == 0) {
      space(i);
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (s.compare(i, 2, "/*") == 0) {
      const std::size_t end = s.find("*/", i + 2);
      space(i);
      i = end == std::string::npos ? s.size() : end + 2;
    } else if (s[i] == 'R' && i + 1 < s.size() && s[i + 1] == '"' &&
               (i == 0 || !is_ident(s[i - 1]) || s[i - 1] == '8' || s[i - 1] == 'u' ||
                s[i - 1] == 'U' || s[i - 1] == 'L')) {
      const std::size_t open = s.find('(', i + 2);
      if (open == std::string::npos) {
        put(i++);
        continue;
      }
      const std::string close = ")" + s.substr(i + 2, open - i - 2) + "\"";
      const std::size_t end = s.find(close, open);
      const std::size_t stop = end == std::string::npos ? s.size() : end + close.size();
      while (i < stop) put(i++, true);
    } else if (s[i] == '"' || s[i] == '\'') {
      const char quote = s[i];
      put(i++);
      while (i < s.size() && s[i] != quote && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < s.size()) put(i++);
        put(i++);
      }
      if (i < s.size()) put(i++);
    } else {
      put(i++);
    }
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' ||
                        s.front() == '\v' || s.front() == '\f')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool escapes(std::string_view name) {
  if (name.empty() || name.front() == '/' || name.find('\\') != std::string_view::npos) return true;
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t slash = name.find('/', start);
    const std::string_view part = name.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part == "..") return true;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return false;
}

// ---- Paths --------------------------------------------------------------------------------------

fs::path canonical_or_self(const fs::path& path) {
  std::error_code ec;
  fs::path real = fs::weakly_canonical(path, ec);
  return ec ? path.lexically_normal() : real;
}

bool is_under(const fs::path& path, const fs::path& dir) {
  auto p = path.begin();
  for (auto d = dir.begin(); d != dir.end(); ++d, ++p) {
    if (d->empty()) continue;  // a trailing separator
    if (p == path.end() || *p != *d) return false;
  }
  return true;
}

bool allowed_header(const fs::path& path, const fs::path& src, const std::vector<fs::path>& dirs) {
  const fs::path real = canonical_or_self(path);
  if (is_under(real, canonical_or_self(src))) return true;
  return std::any_of(dirs.begin(), dirs.end(),
                     [&](const fs::path& dir) { return is_under(real, canonical_or_self(dir)); });
}

// ---- Symbol rules -------------------------------------------------------------------------------

// The entity a special symbol belongs to: "vtable for X" -> "X".
std::string_view entity(std::string_view demangled) {
  static constexpr std::array<std::string_view, 12> kPrefixes = {"vtable for ",
                                                                 "VTT for ",
                                                                 "construction vtable for ",
                                                                 "typeinfo for ",
                                                                 "typeinfo name for ",
                                                                 "guard variable for ",
                                                                 "TLS init function for ",
                                                                 "TLS wrapper function for ",
                                                                 "non-virtual thunk to ",
                                                                 "virtual thunk to ",
                                                                 "covariant return thunk to ",
                                                                 "transaction clone for "};
  for (bool again = true; again;) {
    again = false;
    for (const std::string_view prefix : kPrefixes) {
      if (demangled.starts_with(prefix)) {
        demangled.remove_prefix(prefix.size());
        again = true;
      }
    }
  }
  return demangled;
}

bool c_api(std::string_view name, std::string_view prefix) {
  return name.size() > prefix.size() && name.starts_with(prefix) &&
         ((name[prefix.size()] >= 'A' && name[prefix.size()] <= 'Z') ||
          (name[prefix.size()] >= '0' && name[prefix.size()] <= '9'));
}

constexpr std::string_view kWriteIt = "write the convolution yourself";

// Why a reference to `name` is refused, or "". `allowed` is the one library the file's variant
// may call (variants.def: "none" or "cublas").
std::string forbidden_reference(const std::string& name, const std::string& demangled,
                                const Framework& fw, std::string_view allowed) {
  struct Library {
    std::string_view prefix, what;
  };
  static constexpr std::array<Library, 6> kLibraries = {{{"cudnn", "cuDNN"},
                                                         {"cublas", "cuBLAS"},
                                                         {"cufft", "cuFFT"},
                                                         {"cusparse", "cuSPARSE"},
                                                         {"cusolver", "cuSOLVER"},
                                                         {"cutensor", "cuTENSOR"}}};
  const std::string plain = name.substr(0, name.find('@'));
  for (const Library& lib : kLibraries) {
    if (c_api(plain, lib.prefix)) {
      if (lib.prefix == allowed) continue;
      return std::string(lib.what) + " is not allowed in your code: " + std::string(kWriteIt);
    }
  }
  const std::string_view what = entity(demangled);
  if (what.find("convlab::solution::") != std::string_view::npos) {
    return "the staff solutions are not part of your code: " + std::string(kWriteIt);
  }
  if (fw.library_conv_symbols.count(name) != 0 ||
      what.starts_with("convlab::conv_forward_reference(") ||
      what.starts_with("convlab::conv_forward_cudnn(") ||
      what.starts_with("convlab::cudnn_check(") || what.starts_with("convlab::CudnnConv::") ||
      what == "convlab::CudnnConv") {
    return "the library convolution is not allowed in your code: " + std::string(kWriteIt);
  }
  if (plain == "dlopen" || plain == "dlsym" || plain == "dlmopen" || plain == "dlvsym") {
    return "loading libraries at run time is not allowed: link only your own code";
  }
  // Modules, libraries and driver entry points fetched at run time: code that was not built
  // from the submission's sources.
  static constexpr std::array<std::string_view, 8> kLoaders = {
      "cuModuleLoad", "cuLibraryLoad",    "cudaLibraryLoad",         "cuLinkCreate",
      "cuLinkAdd",    "cuGetProcAddress", "cudaGetDriverEntryPoint", "cuModuleGetFunction"};
  for (const std::string_view loader : kLoaders) {
    if (plain.starts_with(loader)) {
      return "loading GPU code at run time (" + plain +
             ") is not allowed: write your kernels in your own files";
    }
  }
  return {};
}

}  // namespace

// ---- Sources ------------------------------------------------------------------------------------

std::vector<std::string> scan_source(std::string_view text, const std::string& display_name) {
  std::vector<std::string> findings;
  const Logical logical = preprocess_text(text);
  const std::string& s = logical.text;
  const std::string how =
      "include only the framework's headers by their path from the framework root (e.g. "
      "\"reference/core/cuda_check.hpp\") and system headers";
  std::size_t start = 0;
  while (start < s.size()) {
    std::size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    const int line = logical.line[start];
    const std::size_t first = s.find_first_not_of(" \t\r\v\f", start);
    const bool raw = first < end && logical.in_raw[first];
    std::string_view rest = trim(std::string_view(s).substr(start, end - start));
    start = end + 1;
    if (raw) continue;
    if (rest.starts_with("#")) {
      rest.remove_prefix(1);
    } else if (rest.starts_with("%:")) {
      rest.remove_prefix(2);
    } else {
      continue;
    }
    rest = trim(rest);
    std::size_t n = 0;
    while (n < rest.size() && is_ident(rest[n])) ++n;
    const std::string_view directive = rest.substr(0, n);
    if (directive != "include" && directive != "include_next" && directive != "import" &&
        directive != "embed") {
      continue;
    }
    rest = trim(rest.substr(n));
    const std::string where = display_name + ":" + std::to_string(line) + ": ";
    const char close = rest.starts_with('<') ? '>' : rest.starts_with('"') ? '"' : '\0';
    const std::size_t stop = close == '\0' ? std::string_view::npos : rest.find(close, 1);
    if (stop == std::string_view::npos) {
      findings.push_back(where + "#" + std::string(directive) + " " + std::string(rest) +
                         " names its file through a macro (a computed include): " + how);
      continue;
    }
    const std::string_view name = rest.substr(1, stop - 1);
    if (escapes(name)) {
      findings.push_back(where + "includes " + std::string(rest.substr(0, stop + 1)) +
                         ", a path outside the framework: " + how);
    }
  }
  // .incbin reads any file into the object; literals split to hide it are joined first.
  std::string joined;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '"') {
      std::size_t j = i + 1;
      while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      if (j < s.size() && s[j] == '"' && !joined.empty()) {
        i = j;
        continue;
      }
    }
    joined += static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
  }
  if (joined.find("incbin") != std::string::npos) {
    findings.push_back(display_name +
                       ": uses .incbin, which reads a file into your object: keep data in your "
                       "source code");
  }
  return findings;
}

std::vector<std::string> check_dependencies(
    std::string_view deps_text, const fs::path& build_dir, const fs::path& src,
    const std::vector<fs::path>& system_dirs,
    const std::map<std::string, std::string>& object_to_source) {
  std::vector<std::string> findings;
  const std::string* source = nullptr;
  std::size_t start = 0;
  while (start < deps_text.size()) {
    std::size_t end = deps_text.find('\n', start);
    if (end == std::string_view::npos) end = deps_text.size();
    const std::string_view line = deps_text.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    if (line.front() != ' ') {  // "object: #deps N, deps mtime M (VALID)"
      const std::string target(line.substr(0, line.find(": #deps")));
      const auto it = object_to_source.find(target);
      source = it == object_to_source.end() ? nullptr : &it->second;
      continue;
    }
    if (source == nullptr) continue;
    fs::path header(std::string(trim(line)));
    if (header.is_relative()) header = build_dir / header;
    if (!allowed_header(header, src, system_dirs)) {
      findings.push_back(*source + ": includes " + header.lexically_normal().string() +
                         ", which is outside the framework: include only the framework's "
                         "headers and system headers");
    }
  }
  std::sort(findings.begin(), findings.end());
  findings.erase(std::unique(findings.begin(), findings.end()), findings.end());
  return findings;
}

std::vector<std::string> foreign_paths_in_log(std::string_view log, const fs::path& src,
                                              const std::vector<fs::path>& system_dirs) {
  static const std::regex kLocation(
      R"(^(?:In file included from |\s+from )?([^\s:()]+)(?::\d+|\(\d+\)))");
  std::vector<std::string> found;
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    const std::string line(log.substr(start, end - start));
    start = end + 1;
    std::smatch m;
    if (!std::regex_search(line, m, kLocation)) continue;
    const fs::path path(m[1].str());
    if (!path.is_absolute()) continue;
    if (!allowed_header(path, src, system_dirs)) found.push_back(path.string());
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

// ---- Symbols ------------------------------------------------------------------------------------

std::vector<NmSymbol> parse_nm(std::string_view output) {
  std::vector<NmSymbol> symbols;
  std::size_t start = 0;
  while (start < output.size()) {
    std::size_t end = output.find('\n', start);
    if (end == std::string_view::npos) end = output.size();
    const std::string_view line = output.substr(start, end - start);
    start = end + 1;
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space + 1 >= line.size()) continue;  // a file header
    if (space + 2 < line.size() && line[space + 2] != ' ') continue;
    symbols.push_back({std::string(line.substr(0, space)), line[space + 1]});
  }
  return symbols;
}

std::string demangle(const std::string& name) {
  if (!name.starts_with("_Z")) return name;
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> out(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && out ? std::string(out.get()) : name;
}

bool is_undefined(char type) {
  return type == 'U' || type == 'w' || type == 'v';
}

bool is_global_definition(char type, bool* strong) {
  if (type == 'W' || type == 'V' || type == 'u') {
    *strong = false;
    return true;
  }
  if ((type >= 'A' && type <= 'Z' && type != 'U' && type != 'N') || type == 'i') {
    *strong = true;
    return true;
  }
  return false;
}

std::vector<std::string> check_symbols(const std::string& file,
                                       const std::vector<NmSymbol>& symbols, const Framework& fw,
                                       const std::map<std::string, bool>& harness_symbols) {
  std::vector<std::string> findings;
  // The library the file's variant is declared to call, if any (none for a file of no variant).
  const Variant* variant = variant_of_student_file(file);
  const std::string_view allowed =
      library_name(variant != nullptr ? variant->libraries : Library::none);
  for (const NmSymbol& s : symbols) {
    const std::string shown = demangle(s.name);
    if (is_undefined(s.type)) {
      if (const std::string why = forbidden_reference(s.name, shown, fw, allowed); !why.empty()) {
        findings.push_back(file + ": calls " + shown + " (" + why + ")");
      }
      continue;
    }
    bool strong = false;
    if (!is_global_definition(s.type, &strong)) continue;
    if (entity(shown).starts_with("convlab::student::")) continue;
    bool theirs_strong = false, theirs = false;
    for (const auto* table : {&fw.framework_symbols, &harness_symbols}) {
      if (const auto it = table->find(s.name); it != table->end()) {
        theirs = true;
        theirs_strong |= it->second;
      }
    }
    // Two copies of one inline function (a framework header's) are normal; anything else would
    // replace the framework's code with the team's.
    if (theirs && (strong || theirs_strong)) {
      findings.push_back(file + ": defines " + shown +
                         ", which the framework defines too (rename yours, or put it in namespace "
                         "convlab::student)");
      continue;
    }
    const auto lib = fw.library_symbols.find(s.name);
    if (lib != fw.library_symbols.end() &&
        (strong || !s.name.starts_with("_Z") || shown.starts_with("std::chrono::"))) {
      findings.push_back(file + ": defines " + shown + ", which " + lib->second +
                         " defines (your code may not replace a library's function: rename yours)");
    }
  }
  std::sort(findings.begin(), findings.end());
  findings.erase(std::unique(findings.begin(), findings.end()), findings.end());
  return findings;
}

// ---- The log ------------------------------------------------------------------------------------

std::string trim_build_log(std::string_view output,
                           const std::vector<std::pair<std::string, std::string>>& replace,
                           std::size_t max_lines) {
  std::string text(output);
  for (const auto& [from, to] : replace) {
    if (from.empty()) continue;
    for (std::size_t at = text.find(from); at != std::string::npos;
         at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
  }
  static const std::regex kProgress(R"(^\[\d+/\d+\] )");
  std::vector<std::string> lines;
  bool skip_command = false;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    if (skip_command) {  // Ninja echoes the failed command after its FAILED: line
      skip_command = false;
      continue;
    }
    if (line.starts_with("FAILED: ")) {
      skip_command = true;
      continue;
    }
    if (line.starts_with("ninja: ") || std::regex_search(line, kProgress) || trim(line).empty()) {
      continue;
    }
    lines.push_back(std::move(line));
  }
  // From the first error, with the lines that say where it came from.
  const auto is_error = [](const std::string& line) {
    return line.find("error") != std::string::npos ||
           line.find("undefined reference") != std::string::npos ||
           line.find("multiple definition") != std::string::npos;
  };
  std::size_t first = 0;
  while (first < lines.size() && !is_error(lines[first])) ++first;
  if (first == lines.size()) first = 0;
  while (first > 0) {
    const std::string& before = lines[first - 1];
    if (before.starts_with("In file included from") ||
        before.starts_with("                 from ") ||
        before.find(": In function") != std::string::npos ||
        before.find(": in function `") != std::string::npos ||
        before.find(": In member function") != std::string::npos ||
        before.find(": In instantiation of") != std::string::npos ||
        before.find("required from") != std::string::npos ||
        before.find(": In lambda function") != std::string::npos) {
      --first;
    } else {
      break;
    }
  }
  std::string out;
  std::size_t kept = 0;
  for (std::size_t i = first; i < lines.size() && kept < max_lines && out.size() < 16000;
       ++i, ++kept) {
    out += lines[i] + "\n";
  }
  if (first + kept < lines.size()) {
    out += "... (" + std::to_string(lines.size() - first - kept) +
           " more lines: fix the first errors, then build again)\n";
  }
  return out;
}

}  // namespace convlab::grader::build_detail
