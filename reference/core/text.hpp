/// @file
/// @brief Text that is safe to print and store: names a user chose (team names) without
/// terminal control characters.
#pragma once

#include <string>
#include <string_view>

namespace convlab {

/// `text` without what a terminal, a CSV reader or a log would act on: the C0 controls (tab
/// and newline included), DEL, the C1 controls (U+0080-U+009F), whole ESC sequences (CSI
/// "ESC [ ... final", OSC/DCS "ESC ] ... BEL or ESC \", two-byte ones) and bytes that are not
/// valid UTF-8. Printable UTF-8 (accents, CJK, emoji) is kept.
std::string strip_control_chars(std::string_view text);

}  // namespace convlab
