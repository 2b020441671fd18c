/// @file
/// @brief The outputs of a grade: the grader's own report (schema "convlab-grade-report/1"),
/// Gradescope's results.json, and the summary table `convlab grade` prints.
#pragma once

#include <filesystem>
#include <string>

#include "grader/result/grade_result.hpp"

namespace convlab::grader {

/// The report's schema name.
inline constexpr const char* kReportSchema = "convlab-grade-report/1";

/// Every field of `result` as one JSON document (schema kReportSchema): the checks with all
/// their fields (details_json and sandbox_json embedded as objects), optional figures as null.
std::string report_json(const GradeResult& result);

/// Gradescope's results.json: score, execution_time, output, one test per check (name, score,
/// max_score, status passed/failed, output, visibility: hidden-model checks after_published)
/// and, when the ranked time exists, the leaderboard ("Op Time (ms)" ascending, "Speedup vs
/// cuDNN" or, on the CPU, "Speedup vs library conv").
std::string gradescope_json(const GradeResult& result);

/// The table `convlab grade` ends with: check, status, score, reason; then the total, the
/// ranked time and the flags.
std::string summary_table(const GradeResult& result);

/// The network checks as `convlab run` prints a run: Op Time and Correctness (a label line
/// before each when there are several, the check's text for one that failed). Where a check
/// of another kind failed (files, build, symbols) there is no run to show: the summary table.
std::string run_lines(const GradeResult& result);

/// Writes report.json and results.json into `out` (created if needed). Throws Error when the
/// folder cannot be written.
void write_reports(const GradeResult& result, const std::filesystem::path& out);

}  // namespace convlab::grader
