# The staff tree's extra parts. This file is staff-only: the student release leaves it out with
# the folders it names (grader/release/release.cpp, kStaffOnly), and the top-level
# CMakeLists.txt includes it OPTIONAL, so the kit builds the same CMake code with these lists
# empty: no folder is tested for existence anywhere.
set(CONVLAB_HAVE_SOLUTIONS ON)
# Added after the framework and the grader: the staff solutions, class grading (grade-all,
# ingest), the release tool, the staff tools (trainer, calibrator), the submission service
# (convlab serve; it uses the staff tools' SHA-256, so it comes after them).
set(CONVLAB_STAFF_DIRS reference/solutions grader/class grader/release tools grader/service)
# Added by tests/CMakeLists.txt: the grader's suites (hostile submissions and working
# convolutions among them) and the staff tools' tests.
set(CONVLAB_STAFF_TEST_DIRS tests/grader tests/tools)
