// Reading whole files and the reports' time stamps (reference/core/files.hpp).
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <string>

#include "reference/core/error.hpp"
#include "reference/core/files.hpp"
#include "tests/support/test_support.hpp"

namespace test_files {

namespace fs = std::filesystem;

TEST_CASE("read_file returns every byte; a missing file is an error naming it") {
  convlab::test::TempDir dir;
  const fs::path file = dir.path() / "bytes.bin";
  const std::string bytes("a\0b\r\n\xff", 6);
  std::ofstream(file, std::ios::binary) << bytes;
  CHECK(convlab::read_file(file) == bytes);
  CHECK(convlab::try_read_file(file).value() == bytes);

  const fs::path missing = dir.path() / "nowhere.json";
  CHECK_FALSE(convlab::try_read_file(missing).has_value());
  try {
    (void)convlab::read_file(missing, "the report");
    FAIL("no error for a missing file");
  } catch (const convlab::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("cannot read the report " + missing.string()) == 0);
    CHECK(what.find("No such file") != std::string::npos);
  }
}

TEST_CASE("utc_now is ISO 8601 in UTC, to the second") {
  CHECK(std::regex_match(convlab::utc_now(),
                         std::regex(R"(20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]Z)")));
}

}  // namespace test_files
