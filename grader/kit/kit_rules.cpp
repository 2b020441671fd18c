#include "grader/kit/kit_rules.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "reference/core/error.hpp"

namespace convlab::kit {

namespace fs = std::filesystem;

namespace {

// ---- C, C++ and CUDA tokens -------------------------------------------------------------

enum class Kind { ident, number, punct };

struct Token {
  Kind kind;
  std::string text;
  int line;
};

// A string literal's contents (adjacent literals joined, escapes undone) and its first line.
struct Literal {
  std::string text;
  int line;
};

bool ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Longest match first.
constexpr std::array<std::string_view, 24> kPunct{
    ">>=", "<<=", "->*", "...", "::", "->", "++", "--", "+=", "-=", "*=", "/=",
    "%=",  "&=",  "|=",  "^=",  "==", "!=", "<=", ">=", "&&", "||", "<<", ">>"};

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  void run(std::vector<Token>& tokens, std::vector<Literal>& literals) {
    bool line_start = true;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '\n') {
        ++line_;
        ++i_;
        line_start = true;
        continue;
      }
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i_;
        continue;
      }
      if (starts("//")) {
        skip_to_line_end();
        continue;
      }
      if (starts("/*")) {
        const std::size_t end = s_.find("*/", i_ + 2);
        const std::size_t stop = end == std::string_view::npos ? s_.size() : end + 2;
        count_lines(i_, stop);
        i_ = stop;
        continue;
      }
      // A preprocessor line (and a shell or CMake comment): not code the rule reads.
      if (c == '#' && line_start) {
        while (i_ < s_.size() && s_[i_] != '\n') {
          if (s_[i_] == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n') {
            ++line_;
            ++i_;
          }
          ++i_;
        }
        continue;
      }
      line_start = false;
      if (c == '"' || raw_prefix()) {
        read_literals(literals);
        continue;
      }
      if (c == '\'') {
        skip_quoted('\'');
        continue;
      }
      if (ident_start(c)) {
        const std::size_t b = i_;
        while (i_ < s_.size() && ident_char(s_[i_])) ++i_;
        tokens.push_back({Kind::ident, std::string(s_.substr(b, i_ - b)), line_});
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c)) ||
          (c == '.' && i_ + 1 < s_.size() &&
           std::isdigit(static_cast<unsigned char>(s_[i_ + 1])))) {
        const std::size_t b = i_;
        while (i_ < s_.size()) {
          const char d = s_[i_];
          const bool exponent_sign =
              (d == '+' || d == '-') && i_ > b &&
              std::string_view("eEpP").find(s_[i_ - 1]) != std::string_view::npos;
          if (!(ident_char(d) || d == '.' || d == '\'' || exponent_sign)) break;
          ++i_;
        }
        tokens.push_back({Kind::number, std::string(s_.substr(b, i_ - b)), line_});
        continue;
      }
      std::string_view p = s_.substr(i_, 1);
      for (std::string_view m : kPunct) {
        if (starts(m)) {
          p = m;
          break;
        }
      }
      tokens.push_back({Kind::punct, std::string(p), line_});
      i_ += p.size();
    }
  }

 private:
  bool starts(std::string_view m) const { return s_.substr(i_, m.size()) == m; }

  void count_lines(std::size_t b, std::size_t e) {
    line_ += static_cast<int>(
        std::count(s_.begin() + static_cast<long>(b), s_.begin() + static_cast<long>(e), '\n'));
  }

  void skip_to_line_end() {
    while (i_ < s_.size() && s_[i_] != '\n') ++i_;
  }

  // R"( , u8R"( , LR"( ... at i_.
  bool raw_prefix() const {
    for (std::string_view p :
         {"R\"", "u8R\"", "uR\"", "UR\"", "LR\"", "u8\"", "u\"", "U\"", "L\""}) {
      if (starts(p) && (i_ == 0 || !ident_char(s_[i_ - 1]))) return true;
    }
    return false;
  }

  // A '...' or "..." literal that ends at its quote or, for text that is not C++ (a shell
  // comment's apostrophe), at the end of the line.
  std::string skip_quoted(char quote) {
    std::string text;
    ++i_;
    while (i_ < s_.size() && s_[i_] != quote && s_[i_] != '\n') {
      if (s_[i_] == '\\' && i_ + 1 < s_.size()) {
        const char e = s_[i_ + 1];
        text += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        if (e == '\n') ++line_;
        i_ += 2;
        continue;
      }
      text += s_[i_++];
    }
    if (i_ < s_.size() && s_[i_] == quote) ++i_;
    return text;
  }

  // One or more adjacent string literals, joined into one text.
  void read_literals(std::vector<Literal>& literals) {
    Literal lit{{}, line_};
    for (;;) {
      while (i_ < s_.size() && s_[i_] != '"') ++i_;  // past an encoding prefix
      const bool raw = i_ > 0 && s_[i_ - 1] == 'R';
      if (raw) {
        const std::size_t open = s_.find('(', i_);
        if (open == std::string_view::npos) {
          i_ = s_.size();
          break;
        }
        // Built piecewise: g++ 12 warns (-Wrestrict, wrongly) on ")" + string.
        std::string close(1, ')');
        close += s_.substr(i_ + 1, open - i_ - 1);
        close += '"';
        const std::size_t end = s_.find(close, open + 1);
        const std::size_t stop = end == std::string_view::npos ? s_.size() : end;
        lit.text += s_.substr(open + 1, stop - open - 1);
        count_lines(i_, stop);
        i_ = std::min(s_.size(), stop + close.size());
      } else {
        lit.text += skip_quoted('"');
      }
      // Another literal after only white space continues this one.
      std::size_t j = i_;
      int lines = 0;
      while (j < s_.size() && std::isspace(static_cast<unsigned char>(s_[j])))
        lines += s_[j++] == '\n';
      const std::size_t save = i_;
      i_ = j;
      if (j < s_.size() && (s_[j] == '"' || raw_prefix())) {
        line_ += lines;
        continue;
      }
      i_ = save;
      break;
    }
    literals.push_back(std::move(lit));
  }

  std::string_view s_;
  std::size_t i_ = 0;
  int line_ = 1;
};

// ---- sliding-window reads ---------------------------------------------------------------

using Tokens = std::vector<Token>;
using Range = std::pair<std::size_t, std::size_t>;  // [first, last) of a token vector

bool is(const Token& t, std::string_view text) {
  return t.kind == Kind::punct && t.text == text;
}
bool opens(const Token& t) {
  return is(t, "(") || is(t, "[") || is(t, "{");
}
bool closes(const Token& t) {
  return is(t, ")") || is(t, "]") || is(t, "}");
}

// After an operand: the next + - * is binary.
bool ends_operand(const Token& t) {
  return t.kind != Kind::punct || is(t, ")") || is(t, "]");
}

// The index just past the group that opens at `i`.
std::size_t group_end(const Tokens& t, std::size_t i, std::size_t end) {
  int depth = 0;
  for (; i < end; ++i) {
    if (opens(t[i])) ++depth;
    if (closes(t[i]) && --depth == 0) return i + 1;
  }
  return end;
}

// A term that is one variable: `h`, `threadIdx.x`, `s.W`, `p->q`.
bool is_variable(const Tokens& t, Range r) {
  if (r.first >= r.second || t[r.first].kind != Kind::ident) return false;
  for (std::size_t i = r.first + 1; i < r.second; i += 2) {
    if (!(is(t[i], ".") || is(t[i], "->") || is(t[i], "::")) || i + 1 >= r.second ||
        t[i + 1].kind != Kind::ident) {
      return false;
    }
  }
  return true;
}

using Names = std::set<std::string>;

// Sums of two variables, one of them a loop's (h + p), in [r): one per comma-separated list
// level that holds such terms, counted in every nested group too. With `subscripts_only`, a
// level counts only inside [ ]. A sum of two other variables (base + offset) is a 1-D shift.
int sliding_sums(const Tokens& t, Range r, bool subscripts_only, const Names& loops) {
  int count = 0;
  std::size_t term_start = r.first;
  int variables = 0;
  bool loop_variable = false;
  const auto end_term = [&](std::size_t at) {
    if (is_variable(t, {term_start, at})) {
      ++variables;
      loop_variable = loop_variable || (at == term_start + 1 && loops.contains(t[term_start].text));
    }
    term_start = at + 1;
  };
  const auto end_list_item = [&] {
    if (variables >= 2 && loop_variable && !subscripts_only) ++count;
    variables = 0;
    loop_variable = false;
  };
  for (std::size_t i = r.first; i < r.second;) {
    if (opens(t[i])) {
      const std::size_t e = group_end(t, i, r.second);
      if (e - i >= 2) {
        count += sliding_sums(t, {i + 1, e - 1}, subscripts_only && !is(t[i], "["), loops);
      }
      i = e;
      continue;
    }
    if ((is(t[i], "+") || is(t[i], "-")) && i > r.first && ends_operand(t[i - 1])) {
      end_term(i);
    } else if (is(t[i], ",") || is(t[i], "?") || is(t[i], ":")) {
      end_term(i);
      end_list_item();
    }
    ++i;
  }
  end_term(r.second);
  end_list_item();
  return count;
}

// A product of values: a binary * outside subscripts (an index's h * W is not one).
bool has_binary_product(const Tokens& t, Range r) {
  for (std::size_t i = r.first; i < r.second;) {
    if (is(t[i], "[")) {
      i = group_end(t, i, r.second);
      continue;
    }
    if (i > r.first && is(t[i], "*") && ends_operand(t[i - 1])) return true;
    ++i;
  }
  return false;
}

bool has_fma_call(const Tokens& t, Range r) {
  for (std::size_t i = r.first; i + 1 < r.second; ++i) {
    if (t[i].kind != Kind::ident || !is(t[i + 1], "(")) continue;
    std::string lower = t[i].text;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.find("fma") != std::string::npos) return true;
  }
  return false;
}

bool mentions(const Tokens& t, Range r, const std::string& name) {
  for (std::size_t i = r.first; i < r.second; ++i) {
    if (t[i].kind == Kind::ident && t[i].text == name) return true;
  }
  return false;
}

// How many window sums each variable carries.
using Windows = std::map<std::string, int>;

// The most window sums a variable read in [r) carries; `skip` (an accumulator read back in
// `acc = acc + ...`) does not count.
int inherited(const Tokens& t, Range r, const Windows& vars, const Names& loops,
              const std::string& skip = {}) {
  int best = 0;
  for (std::size_t i = r.first; i < r.second; ++i) {
    if (t[i].kind != Kind::ident || t[i].text == skip || (i + 1 < r.second && is(t[i + 1], "("))) {
      continue;
    }
    const auto v = vars.find(t[i].text);
    if (v == vars.end()) continue;
    int carried = v->second;
    // row[q] with row = x + (h + p) * W: a loop variable as a term of the index is the
    // window's other sum.
    if (i + 1 < r.second && is(t[i + 1], "[")) {
      const std::size_t e = group_end(t, i + 1, r.second);  // just past the ]
      std::size_t term = i + 2;
      for (std::size_t j = i + 2; j < e; ++j) {
        if (opens(t[j])) {
          j = group_end(t, j, e) - 1;
          continue;
        }
        if (!(j + 1 == e || ((is(t[j], "+") || is(t[j], "-")) && j > term))) continue;
        if (j == term + 1 && t[term].kind == Kind::ident && loops.contains(t[term].text)) {
          ++carried;
          break;
        }
        term = j + 1;
      }
    }
    best = std::max(best, carried);
  }
  return best;
}

// The variable a left-hand side writes: its last name outside brackets (`acc` of acc[f][v],
// `row` of `const float* row`).
std::string target_of(const Tokens& t, Range r) {
  std::string name;
  for (std::size_t i = r.first; i < r.second;) {
    if (opens(t[i])) {
      i = group_end(t, i, r.second);
      continue;
    }
    if (t[i].kind == Kind::ident) name = t[i].text;
    ++i;
  }
  return name;
}

// The variables a `for` header's group [r) steps: those its first clause assigns and those its
// last clause increments (`for (; o + 4 <= out; o += 4)`), or a range-for's element.
void note_loop_variables(const Tokens& t, Range r, Names& loops) {
  int clause = 0;
  for (std::size_t i = r.first; i < r.second;) {
    if (opens(t[i])) {
      i = group_end(t, i, r.second);
      continue;
    }
    if (is(t[i], ";")) ++clause;
    if (t[i].kind == Kind::ident && i + 1 < r.second) {
      const Token& next = t[i + 1];
      const bool steps =
          (clause == 0 && (is(next, "=") || is(next, ":"))) ||
          (clause == 2 &&
           (is(next, "++") || is(next, "--") || is(next, "+=") || is(next, "-=") || is(next, "=") ||
            (i > r.first && (is(t[i - 1], "++") || is(t[i - 1], "--")))));
      if (steps) loops.insert(t[i].text);
    }
    ++i;
  }
}

// Drops a statement's leading `for (...)`, `if (...)`, `else`, `do`, noting each for's loop
// variables.
std::size_t statement_body(const Tokens& t, Range r, Names& loops) {
  std::size_t i = r.first;
  for (;;) {
    if (i >= r.second) return i;
    const std::string& w = t[i].text;
    if (t[i].kind == Kind::ident && (w == "for" || w == "while" || w == "if" || w == "switch")) {
      std::size_t j = i + 1;
      if (j < r.second && t[j].text == "constexpr") ++j;
      if (j < r.second && is(t[j], "(")) {
        const std::size_t e = group_end(t, j, r.second);
        if (w == "for") note_loop_variables(t, {j + 1, e - 1}, loops);
        i = e;
        continue;
      }
    }
    if (t[i].kind == Kind::ident && (w == "else" || w == "do")) {
      ++i;
      continue;
    }
    return i;
  }
}

// What one function has learnt so far.
struct Function {
  Windows vars;  // window sums each variable carries
  Names loops;   // the variables its for loops step
};

void assignment(const Tokens& t, Range r, Function& fn, std::vector<ConvolutionFinding>& out);

// One statement; a declaration of several variables (`a = f(x), b = g(y)`) is one assignment
// per declarator.
void statement(const Tokens& t, Range r, Function& fn, std::vector<ConvolutionFinding>& out) {
  std::size_t b = statement_body(t, r, fn.loops);
  for (std::size_t i = b; i < r.second;) {
    if (opens(t[i])) {
      i = group_end(t, i, r.second);
      continue;
    }
    if (is(t[i], ",")) {
      assignment(t, {b, i}, fn, out);
      b = i + 1;
    }
    ++i;
  }
  assignment(t, {b, r.second}, fn, out);
}

void assignment(const Tokens& t, Range r, Function& fn, std::vector<ConvolutionFinding>& out) {
  const std::size_t b = r.first;
  Windows& vars = fn.vars;
  // The first assignment outside brackets.
  std::size_t op = r.second;
  for (std::size_t i = b; i < r.second;) {
    if (opens(t[i])) {
      i = group_end(t, i, r.second);
      continue;
    }
    if (is(t[i], "=") || is(t[i], "+=") || is(t[i], "-=")) {
      op = i;
      break;
    }
    ++i;
  }
  if (op == r.second) return;
  const Range lhs{b, op}, rhs{op + 1, r.second};
  const std::string target = target_of(t, lhs);
  if (target.empty() || target == "operator") return;
  const bool compound = !is(t[op], "=");
  const bool accumulates = (compound && (has_binary_product(t, rhs) || has_fma_call(t, rhs))) ||
                           (!compound && mentions(t, rhs, target) &&
                            (has_binary_product(t, rhs) || has_fma_call(t, rhs)));
  if (accumulates) {
    const int windows =
        sliding_sums(t, rhs, true, fn.loops) + inherited(t, rhs, vars, fn.loops, target);
    if (windows >= 2) {
      out.push_back({t[op].line,
                     "accumulates products read through a 2-D sliding window "
                     "(the acc += x[..h+p..w+q..] * k[..] of a convolution)"});
    }
  }
  const int carried = sliding_sums(t, rhs, false, fn.loops) + inherited(t, rhs, vars, fn.loops);
  if (carried > 0) vars[target] = std::max(vars[target], carried);
}

// Whether the `{` at i, in a statement that began at `start` with `paren` groups open, opens a
// block of statements rather than a braced value (`std::int64_t{c}`, `= {1, 2}`).
bool opens_block(const Tokens& t, std::size_t start, std::size_t i, int paren) {
  if (i == start) return true;
  const Token& prev = t[i - 1];
  if (is(prev, ")") || is(prev, "]")) return true;  // a function's, a loop's or a lambda's body
  if (prev.kind == Kind::ident) {
    for (std::string_view w : {"else", "do", "try", "const", "noexcept", "override", "mutable"}) {
      if (prev.text == w) return true;
    }
  }
  if (paren > 0 || is(prev, "=") || is(prev, ",") || prev.text == "return") return false;
  for (std::size_t j = start; j < i; ++j) {
    if (is(t[j], "=") || is(t[j], "+=") || is(t[j], "-=")) return false;  // x = T{...}
  }
  return true;
}

std::vector<ConvolutionFinding> analyse(const Tokens& t) {
  std::vector<ConvolutionFinding> out;
  Function fn;
  // Braces of namespaces, classes and enums hold functions; the others are code blocks.
  std::vector<bool> container;
  std::size_t start = 0;
  int paren = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (is(t[i], "(") || is(t[i], "[")) ++paren;
    if (is(t[i], ")") || is(t[i], "]")) paren = std::max(0, paren - 1);
    const bool brace = is(t[i], "{") || is(t[i], "}");
    if (!(is(t[i], ";") && paren == 0) && !brace) continue;
    if (is(t[i], "{")) {
      if (!opens_block(t, start, i, paren)) {
        i = group_end(t, i, t.size()) - 1;
        continue;
      }
      // A function's header has a parameter list; a namespace's or a class's has none.
      bool holder = false, parameters = false;
      for (std::size_t j = start; j < i; ++j) {
        parameters = parameters || is(t[j], ")");
        for (std::string_view w : {"namespace", "struct", "class", "union", "enum", "extern"}) {
          holder = holder || (t[j].kind == Kind::ident && t[j].text == w);
        }
      }
      container.push_back(holder && !parameters);
      statement_body(t, {start, i}, fn.loops);  // a loop header before its block
    } else {
      statement(t, {start, i}, fn, out);
      if (is(t[i], "}") && !container.empty()) {
        container.pop_back();
        if (std::find(container.begin(), container.end(), false) == container.end()) fn = {};
      }
    }
    start = i + 1;
    paren = 0;
  }
  statement(t, {start, t.size()}, fn, out);
  return out;
}

std::vector<ConvolutionFinding> scan(std::string_view source, int first_line, int depth) {
  Tokens tokens;
  std::vector<Literal> literals;
  Lexer(source).run(tokens, literals);
  std::vector<ConvolutionFinding> found = analyse(tokens);
  for (ConvolutionFinding& f : found) f.line += first_line - 1;
  // Code kept in a string literal (a test fixture) counts as code. Nested strings end the
  // recursion at a small depth.
  if (depth < 3) {
    for (const Literal& lit : literals) {
      for (ConvolutionFinding& f : scan(lit.text, first_line + lit.line - 1, depth + 1)) {
        found.push_back(std::move(f));
      }
    }
  }
  std::sort(
      found.begin(), found.end(),
      [](const ConvolutionFinding& a, const ConvolutionFinding& b) { return a.line < b.line; });
  return found;
}

std::string extension_of(const std::string& rel) {
  std::string ext = fs::path(rel).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

}  // namespace

std::vector<ConvolutionFinding> find_convolutions(std::string_view source) {
  return scan(source, 1, 0);
}

const std::vector<SanctionedConvolution>& sanctioned_convolutions() {
  static const std::vector<SanctionedConvolution> list{
      {"reference/conv/library_conv_cpu.cpp",
       "the library convolution on the CPU: m1 runs it and every check trusts it; the grader's "
       "symbols check rejects team code that calls it"},
      {"reference/conv/elementwise.cpp",
       "the double-precision reference the element-wise check compares every output with"},
      {"reference/network/exact.cpp",
       "the float64 network behind the precision classes' rule: its conv layer carries each "
       "output's error bound along with the double-precision sum"},
  };
  return list;
}

bool convolution_rule_reads(const std::string& rel_path) {
  if (rel_path.starts_with("student/")) return false;
  static const std::set<std::string> skipped{".md", ".json", ".svg", ".safetensors", ".gz", ".png"};
  return !skipped.contains(extension_of(rel_path));
}

std::vector<std::string> kit_convolutions(const std::string& rel_path, std::string_view text) {
  if (!convolution_rule_reads(rel_path)) return {};
  for (const SanctionedConvolution& s : sanctioned_convolutions()) {
    if (s.path == rel_path) return {};
  }
  std::vector<std::string> lines;
  for (const ConvolutionFinding& f : find_convolutions(text)) {
    lines.push_back(rel_path + ":" + std::to_string(f.line) + ": " + f.what);
  }
  return lines;
}

// ---- paths named in Markdown ------------------------------------------------------------

namespace {

// The tree's top folders: a word that starts with one of them names a tree path.
constexpr std::array<std::string_view, 9> kTopFolders{"cmake/",   "datasets/",   "docs/",
                                                      "grader/",  "milestones/", "reference/",
                                                      "student/", "tests/",      "tools/"};

bool path_char(char c) {
  return ident_char(c) || c == '.' || c == '/' || c == '-' || c == '*' || c == '<' || c == '>' ||
         c == '{' || c == '}';
}

// A pattern rather than a file: `<id>`, `{a,b}`, a placeholder word (`NAME.safetensors`).
bool is_pattern(const std::string& path) {
  if (path.find_first_of("<>{}") != std::string::npos || path.find("...") != std::string::npos) {
    return true;
  }
  static const std::set<std::string> placeholders{"ID",   "NAME",  "NET",     "N", "X",
                                                  "TEAM", "MODEL", "VARIANT", "M"};
  std::string word;
  for (std::size_t i = 0; i <= path.size(); ++i) {
    if (i < path.size() && std::isalnum(static_cast<unsigned char>(path[i]))) {
      word += path[i];
      continue;
    }
    if (placeholders.contains(word)) return true;
    word.clear();
  }
  return false;
}

// `a/b/../c` -> `a/c`; empty when the path leaves the tree.
std::string normalise(const std::string& path) {
  std::vector<std::string> parts;
  std::istringstream in(path);
  for (std::string part; std::getline(in, part, '/');) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (parts.empty()) return {};
      parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "/") + p;
  if (!path.empty() && path.back() == '/' && !out.empty()) out += '/';
  return out;
}

// A glob names the folder before its wildcard.
std::string before_wildcard(const std::string& path) {
  const std::size_t star = path.find_first_of("*?");
  if (star == std::string::npos) return path;
  return path.substr(0, path.rfind('/', star) + 1);
}

constexpr std::string_view kStaffBegin = "<!-- staff-only: begin -->";
constexpr std::string_view kStaffEnd = "<!-- staff-only: end -->";

}  // namespace

std::string kit_markdown(const std::string& rel_path, std::string_view text) {
  std::string out;
  std::size_t opened_at = 0;  // the line of an open block, 0 when none is
  std::size_t line = 0;
  for (std::size_t b = 0; b < text.size();) {
    std::size_t e = text.find('\n', b);
    e = e == std::string_view::npos ? text.size() : e + 1;
    const std::string_view l = text.substr(b, e - b);
    std::string_view bare = l;
    while (!bare.empty() && std::isspace(static_cast<unsigned char>(bare.back()))) {
      bare.remove_suffix(1);
    }
    ++line;
    if (bare == kStaffBegin || bare == kStaffEnd) {
      if ((bare == kStaffBegin) == (opened_at != 0)) {
        throw Error(rel_path + ":" + std::to_string(line) + ": " + std::string(bare) +
                    (opened_at != 0 ? " inside the staff-only block opened on line " +
                                          std::to_string(opened_at)
                                    : " without a staff-only block to close"));
      }
      opened_at = bare == kStaffBegin ? line : 0;
    } else if (opened_at == 0) {
      out += l;
    }
    b = e;
  }
  if (opened_at != 0) {
    throw Error(rel_path + ":" + std::to_string(opened_at) + ": a staff-only block without " +
                std::string(kStaffEnd));
  }
  return out;
}

std::vector<NamedPath> markdown_paths(const std::string& rel_path, std::string_view text) {
  std::vector<NamedPath> found;
  const std::string dir = fs::path(rel_path).parent_path().generic_string();
  int line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      continue;
    }
    // A relative link target: ](path) or ](path#anchor).
    if (text.compare(i, 2, "](") == 0) {
      const std::size_t b = i + 2;
      const std::size_t e = text.find_first_of(") \n", b);
      if (e == std::string_view::npos) continue;
      std::string target(text.substr(b, e - b));
      target = target.substr(0, target.find('#'));
      if (target.empty() || target.find(':') != std::string::npos || target.starts_with("/")) {
        continue;
      }
      const std::string resolved = normalise(dir.empty() ? target : dir + "/" + target);
      found.push_back({line, resolved.empty() ? target : resolved});
      i = e - 1;
      continue;
    }
    // A word that starts with a top folder, not inside another path (build/cpu/reference/..).
    if (i > 0 && (path_char(text[i - 1]) || text[i - 1] == '$')) continue;
    const auto top = std::find_if(kTopFolders.begin(), kTopFolders.end(), [&](std::string_view f) {
      return text.substr(i, f.size()) == f;
    });
    if (top == kTopFolders.end()) continue;
    std::size_t e = i;
    while (e < text.size() && path_char(text[e])) ++e;
    std::string word(text.substr(i, e - i));
    i = e - 1;
    while (!word.empty() && (word.back() == '.' || word.back() == '>')) word.pop_back();
    if (is_pattern(word)) continue;
    found.push_back({line, normalise(before_wildcard(word))});
  }
  return found;
}

std::vector<std::string> missing_markdown_paths(
    const std::string& rel_path, std::string_view text,
    const std::function<bool(const std::string&)>& exists) {
  std::vector<std::string> missing;
  if (rel_path == "CHANGELOG.md") return missing;
  for (const NamedPath& p : markdown_paths(rel_path, text)) {
    if (p.path.starts_with("../") || !exists(p.path)) {
      missing.push_back(rel_path + ":" + std::to_string(p.line) + ": names " + p.path +
                        ", which the kit does not have");
    }
  }
  return missing;
}

std::optional<std::vector<std::string>> release_manifest_files(const fs::path& root) {
  std::ifstream in(root / "RELEASE");
  if (!in) return std::nullopt;
  std::vector<std::string> files;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.starts_with("#")) continue;
    // sha256sum's format: 64 hex digits, two characters, the path.
    if (line.size() < 67 || line.find_first_not_of("0123456789abcdef") != 64) {
      throw Error((root / "RELEASE").string() + ": a line that is not `SHA-256  path`: " + line);
    }
    files.push_back(line.substr(66));
  }
  return files;
}

}  // namespace convlab::kit
