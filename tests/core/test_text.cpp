// strip_control_chars: what a team name keeps and loses before it is printed or stored.
#include <doctest/doctest.h>

#include <string>

#include "reference/core/text.hpp"

namespace test_text {

using convlab::strip_control_chars;

TEST_CASE("printable ASCII and UTF-8 are kept as they are") {
  CHECK(strip_control_chars("team-01_Ada Lovelace") == "team-01_Ada Lovelace");
  CHECK(strip_control_chars("équipe 東京 🚀") == "équipe 東京 🚀");
  CHECK(strip_control_chars("") == "");
}

TEST_CASE("C0 controls, DEL and C1 controls are dropped") {
  CHECK(strip_control_chars("a\x07"
                            "b\tc\nd\re\x7f"
                            "f") == "abcdef");
  CHECK(strip_control_chars(std::string("a\0b", 3)) == "ab");
  // U+0085 (NEL) and U+009B (CSI) in UTF-8, and a lone 0x9B byte (8-bit CSI).
  CHECK(strip_control_chars("a\xc2\x85"
                            "b\xc2\x9b"
                            "31mc\x9b"
                            "d") == "ab31mcd");
}

TEST_CASE("whole escape sequences are dropped, not only the ESC") {
  CHECK(strip_control_chars("\x1b[31mred\x1b[0m") == "red");
  CHECK(strip_control_chars("\x1b[2J\x1b[1;1Hwiped") == "wiped");
  // Window title (OSC ended by BEL, then by ST) and a hyperlink.
  CHECK(strip_control_chars("\x1b]0;owned\x07team") == "team");
  CHECK(strip_control_chars("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\") == "link");
  CHECK(strip_control_chars("a\x1b"
                            "cb") == "ab");        // RIS: reset the terminal
  CHECK(strip_control_chars("a\x1b(Bb") == "ab");  // charset selection
  CHECK(strip_control_chars("cut\x1b") == "cut");  // ESC at the end
  CHECK(strip_control_chars("\x1b[31") == "");     // unfinished CSI
}

TEST_CASE("bytes that are not UTF-8 are dropped") {
  CHECK(strip_control_chars("a\xff\xfe"
                            "b") == "ab");
  CHECK(strip_control_chars("a\xc0\xafz") == "az");      // overlong '/'
  CHECK(strip_control_chars("a\xed\xa0\x80z") == "az");  // a surrogate
  CHECK(strip_control_chars("a\xe2\x82") == "a");        // cut short
}

TEST_CASE("escape_control_chars shows every control byte and keeps the text") {
  using convlab::escape_control_chars;
  CHECK(escape_control_chars("plain Zoë 名前") == "plain Zoë 名前");
  CHECK(escape_control_chars("a\x1b[31mb\x07") == "a\\x1b[31mb\\x07");
  CHECK(escape_control_chars("two\nlines\t") == "two\\x0alines\\x09");
  CHECK(escape_control_chars("two\nlines\t", true) == "two\nlines\t");
  CHECK(escape_control_chars("c1 \xc2\x9b del \x7f bad \xff") ==
        "c1 \\xc2\\x9b del \\x7f bad \\xff");
}

TEST_CASE("trim drops spaces, tabs, CR and LF at the ends only") {
  using convlab::trim;
  CHECK(trim("  12345 \t\r\n") == "12345");
  CHECK(trim("a b") == "a b");
  CHECK(trim("\n x\ty \r") == "x\ty");
  CHECK(trim(" \t\r\n").empty());
  CHECK(trim("").empty());
  CHECK(trim("\vv\f") == "\vv\f");  // only the four
}

}  // namespace test_text
