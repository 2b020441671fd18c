// The profile summary without a GPU: aggregation, nvprof's number formats and table layout,
// checked against a real nvprof table from a student report of the original course
// (data/nvprof_table.txt: shape only, the numbers differ).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "reference/profile/report.hpp"
#include "tests/support/test_support.hpp"

namespace test_profile_report {

using namespace convlab::profile;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream f(path);
  REQUIRE_MESSAGE(f.good(), "cannot read " << path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  return lines;
}

// The end of each right-aligned column in a header: one past the last letter of each word
// before "Name".
std::vector<std::size_t> column_ends(const std::string& header) {
  std::vector<std::size_t> ends;
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] != ' ' && (i + 1 == header.size() || header[i + 1] == ' ')) ends.push_back(i + 1);
  }
  ends.pop_back();  // "Name" is left-aligned
  return ends;
}

// The cell of the right-aligned column that ends at `end`, or "" when that column position
// does not hold a whole cell (a space must follow the cell and come before it).
std::string cell_ending_at(const std::string& line, std::size_t end) {
  if (end > line.size() || end == 0 || line[end - 1] == ' ') return "";
  if (end < line.size() && line[end] != ' ') return "";
  std::size_t begin = end;
  while (begin > 0 && line[begin - 1] != ' ') --begin;
  return line.substr(begin, end - begin);
}

// A number's form: every digit as 9 ("4.5016ms" -> "9.9999ms").
std::string form_of(std::string cell) {
  for (char& ch : cell) {
    if (ch >= '0' && ch <= '9') ch = '9';
  }
  return cell;
}

// Seconds from an nvprof duration ("4.5016ms" -> 0.0045016).
double seconds_of(const std::string& cell) {
  static const std::regex re(R"(^([0-9.]+)(ns|us|ms|s)$)");
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_match(cell, m, re), "not a duration: " << cell);
  const double v = std::stod(m[1]);
  const std::string unit = m[2];
  return unit == "ns" ? v * 1e-9 : unit == "us" ? v * 1e-6 : unit == "ms" ? v * 1e-3 : v;
}

ProfileRecord rec(Section s, std::string name, std::uint64_t ns) {
  return {s, std::move(name), ns};
}

// A profile shaped like a GPU run of the network: a conv kernel, the other layers, copies.
Profile network_like_profile() {
  Profile p;
  const Section g = Section::gpu_activities;
  const Section a = Section::api_calls;
  for (std::uint64_t ns : {60'123'456ull, 59'876'543ull}) p.records.push_back(rec(g, "conv", ns));
  p.records.push_back(rec(g, "tanh_kernel(float*, int)", 1'234'567));
  p.records.push_back(rec(g, "maxpool_kernel(float const*, float*)", 456'789));
  for (std::uint64_t ns : {4'187'400ull, 1'568ull, 2'100ull, 999'999ull}) {
    p.records.push_back(rec(g, memcpy_name(CopyKind::htod), ns));
  }
  p.records.push_back(rec(g, memcpy_name(CopyKind::dtoh), 9'696));
  p.records.push_back(rec(g, std::string(kMemsetName), 612));
  p.records.push_back(rec(a, "cudaMalloc", 412'345'678));
  p.records.push_back(rec(a, "cudaMalloc", 8'765));
  p.records.push_back(rec(a, "cudaLaunchKernel", 5'432));
  p.records.push_back(rec(a, "cudaLaunchKernel", 3'210));
  p.records.push_back(rec(a, "cudaMemcpy", 19'123'456));
  p.records.push_back(rec(a, "cudaDeviceSynchronize", 2'345'678'901));
  p.records.push_back(rec(Section::overhead, "[CUPTI resource]", 3'000'000));
  p.wall_ns = 3'200'000'000;
  return p;
}

}  // namespace

TEST_CASE("durations print as nvprof printed them") {
  // Values from real nvprof tables.
  CHECK(format_duration(608) == "608ns");
  CHECK(format_duration(482.59) == "482ns");  // nvprof truncated averages to whole ns
  CHECK(format_duration(999.9) == "999ns");
  CHECK(format_duration(3584) == "3.5840us");
  CHECK(format_duration(21377) == "21.377us");
  CHECK(format_duration(375440) == "375.44us");
  CHECK(format_duration(4.5016e6) == "4.5016ms");
  CHECK(format_duration(56.525e6) == "56.525ms");
  CHECK(format_duration(132.17e6) == "132.17ms");
  CHECK(format_duration(7.55369e9) == "7.55369s");
  CHECK(format_duration(19.0477e9) == "19.0477s");
  CHECK(format_duration(978.58e6) == "978.58ms");
  // Unit boundaries, including rounding that carries into the next unit.
  CHECK(format_duration(1000) == "1.0000us");
  CHECK(format_duration(999'996) == "1.0000ms");
  CHECK(format_duration(9'999.96) == "10.000us");
  CHECK(format_duration(999'999'600) == "1.00000s");
  CHECK(format_duration(1234.5e9) == "1234.50s");
  CHECK(format_duration(0) == "0ns");
  CHECK(format_duration(-5) == "0ns");
  CHECK(format_duration(std::nan("")) == "0ns");

  // Any duration: one of the forms, 5 significant digits (6 in seconds), the right value.
  const std::regex form(R"(^([0-9]{1,3}ns|[0-9]\.[0-9]{4}(us|ms)|[0-9]{2}\.[0-9]{3}(us|ms)|)"
                        R"([0-9]{3}\.[0-9]{2}(us|ms)|[0-9]\.[0-9]{5}s|[0-9]{2}\.[0-9]{4}s|)"
                        R"([0-9]{3}\.[0-9]{3}s)$)");
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> exponent(0.0, 11.9);
  for (int i = 0; i < 5000; ++i) {
    const double ns = std::pow(10.0, exponent(gen));
    const std::string text = format_duration(ns);
    INFO(ns, " -> ", text);
    REQUIRE(std::regex_match(text, form));
    const double back = seconds_of(text) * 1e9;
    if (ns < 1000) {
      CHECK(back == doctest::Approx(std::floor(ns)));
    } else {
      CHECK(std::fabs(back - ns) <= ns * 5.01e-5);
    }
  }
}

TEST_CASE("percentages print with two decimals") {
  CHECK(format_percent(70.5712) == "70.57%");
  CHECK(format_percent(100.0) == "100.00%");
  CHECK(format_percent(0.001) == "0.00%");
}

TEST_CASE("records aggregate by section and name, longest total first") {
  const ProfileSummary s = summarize(network_like_profile());
  REQUIRE(s.gpu_activities.size() == 6);
  REQUIRE(s.api_calls.size() == 4);
  REQUIRE(s.overhead.size() == 1);
  CHECK(s.wall_ns == 3'200'000'000);

  const ProfileRow& conv = s.gpu_activities.front();
  CHECK(conv.name == "conv");
  CHECK(conv.calls == 2);
  CHECK(conv.total_ns == 120'000'000 - 1);
  CHECK(conv.min_ns == 59'876'543);
  CHECK(conv.max_ns == 60'123'456);
  CHECK(conv.avg_ns == doctest::Approx(59'999'999.5));

  const ProfileRow& htod = s.gpu_activities[1];
  CHECK(htod.name == "[CUDA memcpy HtoD]");
  CHECK(htod.calls == 4);
  CHECK(htod.min_ns == 1'568);
  CHECK(htod.max_ns == 4'187'400);

  for (const auto* rows : {&s.gpu_activities, &s.api_calls}) {
    double sum = 0.0;
    for (std::size_t i = 0; i < rows->size(); ++i) {
      sum += (*rows)[i].percent;
      if (i > 0) CHECK((*rows)[i - 1].total_ns >= (*rows)[i].total_ns);
    }
    CHECK(sum == doctest::Approx(100.0).epsilon(1e-12));
  }
  CHECK(s.api_calls.front().name == "cudaDeviceSynchronize");
  CHECK(s.api_calls[1].name == "cudaMalloc");
  CHECK(s.api_calls[1].calls == 2);
  CHECK(s.overhead.front().percent == doctest::Approx(100.0));
}

TEST_CASE("equal totals sort by name; an empty section has no rows") {
  Profile p;
  p.records = {rec(Section::gpu_activities, "b", 10), rec(Section::gpu_activities, "a", 10),
               rec(Section::gpu_activities, "c", 0)};
  const ProfileSummary s = summarize(p);
  REQUIRE(s.gpu_activities.size() == 3);
  CHECK(s.gpu_activities[0].name == "a");
  CHECK(s.gpu_activities[1].name == "b");
  CHECK(s.gpu_activities[2].percent == 0.0);
  CHECK(s.api_calls.empty());

  Profile zeros;
  zeros.records = {rec(Section::api_calls, "cudaGetLastError", 0)};
  CHECK(summarize(zeros).api_calls.front().percent == 0.0);  // no division by a zero total
}

TEST_CASE("kernel names are demangled; plain names stay as they are") {
  CHECK(demangle("_Z3fooPfPKfi") == "foo(float*, float const*, int)");
  CHECK(demangle("_Z11conv_kernelILi16EEvPfPKfS2_iiiiii") ==
        "void conv_kernel<16>(float*, float const*, float const*, int, int, int, int, int, int)");
  CHECK(demangle("sgemm_128x128_nn") == "sgemm_128x128_nn");  // extern "C" or library names
  CHECK(demangle("f") == "f");  // not "float", what a type demangler would make of it
  CHECK(demangle("_Z") == "_Z");
  CHECK(demangle("_Zbroken!") == "_Zbroken!");
}

TEST_CASE("API callback names lose CUPTI's version suffix") {
  CHECK(api_name("cudaLaunchKernel_v7000") == "cudaLaunchKernel");
  CHECK(api_name("cudaMemcpy_v3020") == "cudaMemcpy");
  CHECK(api_name("cudaMemcpyAsync_ptsz_v7000") == "cudaMemcpyAsync_ptsz");
  CHECK(api_name("cuMemcpyHtoD_v2") == "cuMemcpyHtoD");
  CHECK(api_name("cuInit") == "cuInit");
  CHECK(api_name("cudaFoo_v") == "cudaFoo_v");
  CHECK(api_name("cudaFoo_vX1") == "cudaFoo_vX1");
}

TEST_CASE("copies and sets are named as nvprof named them") {
  CHECK(memcpy_name(CopyKind::htod) == "[CUDA memcpy HtoD]");
  CHECK(memcpy_name(CopyKind::dtoh) == "[CUDA memcpy DtoH]");
  CHECK(memcpy_name(CopyKind::dtod) == "[CUDA memcpy DtoD]");
  CHECK(memcpy_name(CopyKind::ptop) == "[CUDA memcpy PtoP]");
  CHECK(memcpy_name(static_cast<CopyKind>(42)) == "[CUDA memcpy Unknown]");
  CHECK(kMemsetName == "[CUDA memset]");
}

TEST_CASE("the table has nvprof's lines, sections and aligned columns") {
  const ProfileSummary s = summarize(network_like_profile());
  const std::vector<std::string> lines =
      lines_of(format_summary(s, 4242, "convlab run m3 ece408-high 10000"));
  REQUIRE(lines.size() == 3 + 6 + 4 + 1);
  CHECK(lines[0] == "==4242== Profiling application: convlab run m3 ece408-high 10000");
  CHECK(lines[1] == "==4242== Profiling result:");
  const std::string& header = lines[2];
  CHECK(header ==
        "            Type  Time(%)      Time     Calls       Avg       Min       Max  Name");
  CHECK(lines[3].starts_with(" GPU activities:  "));
  CHECK(lines[9].starts_with("      API calls:  "));
  for (std::size_t i : {4, 5, 6, 7, 8, 10, 11, 12})
    CHECK(lines[i].starts_with(std::string(17, ' ')));
  CHECK(lines[3].ends_with("  conv"));
  CHECK(lines[4].ends_with("  [CUDA memcpy HtoD]"));
  CHECK(lines[9].ends_with("  cudaDeviceSynchronize"));
  CHECK(lines[13].starts_with("==4242== Overhead recorded by CUPTI, not counted above: 3.0000ms"));

  // Every number ends where its header word ends, and reads back as the aggregate.
  const std::vector<std::size_t> ends = column_ends(header);
  REQUIRE(ends.size() == 7);
  const std::vector<const ProfileRow*> rows{
      &s.gpu_activities[0], &s.gpu_activities[1], &s.gpu_activities[2], &s.gpu_activities[3],
      &s.gpu_activities[4], &s.gpu_activities[5], &s.api_calls[0],      &s.api_calls[1],
      &s.api_calls[2],      &s.api_calls[3]};
  double percent_sum = 0.0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const std::string& line = lines[3 + r];
    INFO(line);
    std::vector<std::string> cells;
    for (std::size_t c = 1; c < ends.size(); ++c) {
      cells.push_back(cell_ending_at(line, ends[c]));
      REQUIRE(!cells.back().empty());
    }
    CHECK(cells[0] == format_percent(rows[r]->percent));
    CHECK(seconds_of(cells[1]) ==
          doctest::Approx(static_cast<double>(rows[r]->total_ns) * 1e-9).epsilon(1e-4));
    CHECK(cells[2] == std::to_string(rows[r]->calls));
    CHECK(seconds_of(cells[4]) == doctest::Approx(rows[r]->min_ns * 1e-9).epsilon(1e-4));
    CHECK(seconds_of(cells[5]) == doctest::Approx(rows[r]->max_ns * 1e-9).epsilon(1e-4));
    if (r < 6) percent_sum += std::stod(cells[0]);
  }
  CHECK(percent_sum == doctest::Approx(100.0).epsilon(0.0005));  // printed shares, rounded
}

TEST_CASE("the table's shape matches a real nvprof table") {
  const std::vector<std::string> real =
      read_lines((convlab::test::source_dir() / "tests/profile/data/nvprof_table.txt").string());
  // nvprof before CUDA 9 printed the two sections as two tables without the Type column; the
  // Type column came with CUDA 9 and is the only difference.
  REQUIRE(real.size() > 30);
  REQUIRE(real[0] == "==14660== Profiling result:");
  const std::string real_header = real[1];
  const std::vector<std::size_t> real_ends = column_ends(real_header);
  REQUIRE(real_ends.size() == 6);

  // The test's reading of the columns holds on nvprof's own output, and collects every form
  // its durations took.
  std::set<std::string> real_forms;
  int real_rows = 0;
  for (std::size_t i = 2; i < real.size(); ++i) {
    const std::string& line = real[i];
    if (line.empty() || line.starts_with("==") || line.starts_with("Time(%)")) continue;
    INFO(line);
    ++real_rows;
    REQUIRE(std::regex_match(cell_ending_at(line, real_ends[0]), std::regex(R"(\d+\.\d\d%)")));
    for (std::size_t c : {1, 3, 4, 5}) {
      const std::string cell = cell_ending_at(line, real_ends[c]);
      REQUIRE(!cell.empty());
      real_forms.insert(form_of(cell));
    }
    CHECK(std::regex_match(cell_ending_at(line, real_ends[2]), std::regex(R"(\d+)")));
  }
  REQUIRE(real_rows > 30);

  // Ours, with durations spread over every unit, read the same way once the Type column (16
  // characters and its 2-space gap) is taken off.
  Profile p;
  const std::vector<std::uint64_t> spread{608,         21'377,        375'440,
                                          3'584,       4'501'600,     56'525'000,
                                          132'170'000, 7'553'690'000, 12'307'300'000};
  for (std::size_t i = 0; i < spread.size(); ++i) {
    p.records.push_back(rec(Section::gpu_activities, "kernel_" + std::to_string(i), spread[i]));
    p.records.push_back(rec(Section::api_calls, "cudaCall" + std::to_string(i), spread[i]));
  }
  const std::vector<std::string> ours = lines_of(format_summary(summarize(p), 1, ""));
  REQUIRE(ours.size() == 2 + 2 * spread.size());
  CHECK(ours[0] == "==1== Profiling result:");
  CHECK(ours[1].substr(18) == real_header);
  for (std::size_t i = 2; i < ours.size(); ++i) {
    const std::string row = ours[i].substr(18);
    INFO(ours[i]);
    CHECK(std::regex_match(cell_ending_at(row, real_ends[0]), std::regex(R"(\d+\.\d\d%)")));
    CHECK(std::regex_match(cell_ending_at(row, real_ends[2]), std::regex(R"(\d+)")));
    for (std::size_t c : {1, 3, 4, 5}) {
      const std::string cell = cell_ending_at(row, real_ends[c]);
      CHECK_MESSAGE(real_forms.count(form_of(cell)) == 1, "form not seen in nvprof: " << cell);
    }
    // The name starts two spaces after Max, as in nvprof.
    CHECK(row.substr(real_ends[5], 2) == "  ");
    CHECK(row[real_ends[5] + 2] != ' ');
  }
}

TEST_CASE("wide cells widen their column and keep every row aligned") {
  ProfileSummary s;
  s.gpu_activities.push_back(
      {"busy_kernel", 1'234'567'890'123, 5'000'000'000'000, 1, 9, 4.05, 100.0});
  s.api_calls.push_back({"cudaLaunchKernel", 3, 6'000, 1'000, 3'000, 2'000.0, 100.0});
  const std::vector<std::string> lines = lines_of(format_summary(s, 7, ""));
  REQUIRE(lines.size() == 4);
  const std::vector<std::size_t> ends = column_ends(lines[1]);
  for (std::size_t c = 0; c < ends.size(); ++c) {
    CHECK(!cell_ending_at(lines[2], ends[c]).empty());
    CHECK(!cell_ending_at(lines[3], ends[c]).empty());
  }
  CHECK(cell_ending_at(lines[2], ends[3]) == "1234567890123");
  CHECK(cell_ending_at(lines[3], ends[3]) == "3");
}

TEST_CASE("warnings: lost records, nothing recorded") {
  Profile p = network_like_profile();
  p.dropped_records = 12;
  const std::string text = format_summary(summarize(p), 9, "");
  CHECK(text.find("==9== Warning: 12 records were lost") != std::string::npos);
  CHECK(text.find("Profiling application") == std::string::npos);  // no application given

  const std::string empty = format_summary(summarize(Profile{}), 9, "app");
  CHECK(empty ==
        "==9== Profiling application: app\n==9== Profiling result:\n"
        "==9== Warning: no CUDA activity was recorded.\n");
}

TEST_CASE("the JSON form carries the same rows") {
  const ProfileSummary s = summarize(network_like_profile());
  const nlohmann::json j = summary_json(s, 77, "convlab run final");
  CHECK(j["pid"] == 77);
  CHECK(j["application"] == "convlab run final");
  CHECK(j["wall_time_s"].get<double>() == doctest::Approx(3.2));
  CHECK(j["dropped_records"] == 0);
  REQUIRE(j["gpu_activities"].size() == s.gpu_activities.size());
  REQUIRE(j["api_calls"].size() == s.api_calls.size());
  REQUIRE(j["overhead"].size() == 1);
  const nlohmann::json& conv = j["gpu_activities"][0];
  CHECK(conv["name"] == "conv");
  CHECK(conv["calls"] == 2);
  CHECK(conv["time_s"].get<double>() == doctest::Approx(0.119999999));
  CHECK(conv["min_s"].get<double>() == doctest::Approx(0.059876543));
  CHECK(conv["max_s"].get<double>() == doctest::Approx(0.060123456));
  CHECK(conv["avg_s"].get<double>() == doctest::Approx(0.0599999995));
  double sum = 0.0;
  for (const auto& row : j["api_calls"]) sum += row["percent"].get<double>();
  CHECK(sum == doctest::Approx(100.0));
}

}  // namespace test_profile_report
