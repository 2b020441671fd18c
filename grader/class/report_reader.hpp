/// @file
/// @brief Reads a grade report (report.json, schema "convlab-grade-report/1") back into the
/// GradeResult it was written from, checking every field's type on the way: the writer that
/// ingests a class's report folders trusts nothing it has not checked.
#pragma once

#include <string>

#include "grader/result/grade_result.hpp"

namespace convlab::grader {

/// The GradeResult of a report's text. Throws Error, naming the first field that is missing
/// or of the wrong type, when the text is not a grade report.
GradeResult parse_report(const std::string& report_json);

}  // namespace convlab::grader
