#include "reference/core/text.hpp"

#include <cstddef>
#include <cstdint>

namespace convlab {

namespace {

// Index just past the escape sequence that starts at text[i] (an ESC).
std::size_t skip_escape(std::string_view text, std::size_t i) {
  const std::size_t n = text.size();
  ++i;  // ESC
  if (i >= n) return i;
  const auto c = static_cast<unsigned char>(text[i]);
  if (c == '[') {  // CSI: parameters and intermediates, then one final byte 0x40-0x7E
    for (++i; i < n; ++i) {
      const auto b = static_cast<unsigned char>(text[i]);
      if (b >= 0x40 && b <= 0x7E) return i + 1;
      if (b < 0x20 || b > 0x3F) return i;  // malformed: stop before the odd byte
    }
    return n;
  }
  if (c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_') {  // strings: to BEL or ST
    for (++i; i < n; ++i) {
      if (text[i] == '\a') return i + 1;
      if (text[i] == '\x1b') return i + 1 < n && text[i + 1] == '\\' ? i + 2 : i + 1;
    }
    return n;
  }
  while (i < n && static_cast<unsigned char>(text[i]) >= 0x20 &&
         static_cast<unsigned char>(text[i]) <= 0x2F) {
    ++i;  // intermediates, then the final byte
  }
  if (i < n && static_cast<unsigned char>(text[i]) >= 0x30 &&
      static_cast<unsigned char>(text[i]) <= 0x7E) {
    ++i;
  }
  return i;
}

// Length of the valid UTF-8 sequence at text[i] and its code point; 0 when invalid.
std::size_t utf8_at(std::string_view text, std::size_t i, std::uint32_t* cp) {
  const auto c = static_cast<unsigned char>(text[i]);
  std::size_t len = 0;
  std::uint32_t value = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2, value = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, value = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, value = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    value = (value << 6) | (b & 0x3F);
  }
  const bool overlong = (len == 3 && value < 0x800) || (len == 4 && value < 0x10000);
  if (overlong || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 0;
  *cp = value;
  return len;
}

// The next unit of `text` at i: a printable character (ASCII, or valid UTF-8 above the C1
// controls), a whole escape sequence (from ESC), or one byte that is neither (a C0 control,
// DEL, a byte that is not UTF-8) or a C1 control.
struct Unit {
  std::size_t len = 1;
  bool printable = false;
  bool sequence = false;
};

Unit unit_at(std::string_view text, std::size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c == 0x1B) return {skip_escape(text, i) - i, false, true};
  if (c < 0x20 || c == 0x7F) return {1, false, false};
  if (c < 0x80) return {1, true, false};
  std::uint32_t cp = 0;
  const std::size_t len = utf8_at(text, i, &cp);
  if (len == 0) return {1, false, false};  // a lone byte some terminals read as a C1 control
  return {len, cp > 0x9F, false};          // U+0080-U+009F are the C1 controls
}

}  // namespace

std::string strip_control_chars(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const Unit u = unit_at(text, i);
    if (u.printable) out.append(text.substr(i, u.len));
    i += u.len;
  }
  return out;
}

std::string escape_control_chars(std::string_view text, bool keep_newlines) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const Unit u = unit_at(text, i);
    const char c = text[i];
    if (u.printable || (keep_newlines && (c == '\n' || c == '\t'))) {
      out.append(text.substr(i, u.len));
      i += u.len;
      continue;
    }
    // Shown byte by byte; of an escape sequence only ESC, the rest is plain text.
    const std::size_t n = u.sequence ? 1 : u.len;
    for (std::size_t k = 0; k < n; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 0xF];
    }
    i += n;
  }
  return out;
}

std::string trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  const std::size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return "";
  return std::string(text.substr(first, text.find_last_not_of(kSpace) - first + 1));
}

}  // namespace convlab
