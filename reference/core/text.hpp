/// @file
/// @brief Text that is safe to print and store (names a user chose, without terminal control
/// characters), and lines trimmed of the spaces around them.
#pragma once

#include <string>
#include <string_view>

namespace convlab {

/// `text` without what a terminal, a CSV reader or a log would act on: the C0 controls (tab
/// and newline included), DEL, the C1 controls (U+0080-U+009F), whole ESC sequences (CSI
/// "ESC [ ... final", OSC/DCS "ESC ] ... BEL or ESC \", two-byte ones) and bytes that are not
/// valid UTF-8. Printable UTF-8 (accents, CJK, emoji) is kept.
std::string strip_control_chars(std::string_view text);

/// `text` with the same characters shown rather than removed: each control byte, C1 control
/// and byte that is not valid UTF-8 as "\xNN", so a path or an output keeps what it said
/// and drives no terminal. `keep_newlines`: newline and tab stay as they are (multi-line
/// output).
std::string escape_control_chars(std::string_view text, bool keep_newlines = false);

/// `text` without the spaces, tabs, carriage returns and newlines at either end (a line a
/// tool printed, a field of a file).
std::string trim(std::string_view text);

}  // namespace convlab
