#include "grader/service/pages.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "grader/leaderboard/leaderboard.hpp"
#include "reference/core/svg.hpp"

namespace convlab::service {

namespace {

using nlohmann::json;

std::string esc(const std::string& s) {
  return svg::escape(s);
}

// What these pages add to the leaderboard's style sheet.
constexpr const char* kExtraCss = R"css(
a{color:var(--accent)}
pre.output{background:#0d1117;color:#e6edf3;padding:14px 16px;border-radius:8px;overflow-x:auto;font:13px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:pre-wrap;overflow-wrap:anywhere}
.state{font-weight:650}
.state.done{color:#006B3C}.state.failed{color:#9A3412}.state.running{color:var(--accent)}.state.queued{color:var(--muted)}
.counts{display:inline-block;font-size:12px;font-weight:650;padding:1px 8px;border-radius:999px;background:#0072B2;color:#fff}
td.args{white-space:normal;font-family:ui-monospace,monospace;font-size:13px}
details summary{cursor:pointer;color:var(--muted)}
)css";

// The head and the opening of <main>, the header included.
std::string page_start(const std::string& title, const std::string& eyebrow, int refresh_s) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
       "style-src 'unsafe-inline'\">\n";
  if (refresh_s > 0) o << "<meta http-equiv=\"refresh\" content=\"" << refresh_s << "\">\n";
  o << "<title>" << esc(title) << "</title>\n<style>" << grader::leaderboard_css() << kExtraCss
    << "</style>\n</head>\n<body>\n<main>\n<header>\n<p class=\"eyebrow\">" << esc(eyebrow)
    << "</p>\n<h1>" << esc(title) << "</h1>\n";
  return o.str();
}

constexpr const char* kPageEnd = "</main>\n</body>\n</html>\n";

std::string state_html(const JobInfo& j) {
  return "<span class=\"state " + esc(j.state) + "\">" + esc(j.state) + "</span>";
}

// The job's arguments as `convlab submit` takes them: a model and N, a --variant.
std::string args_text(const JobInfo& j) {
  const json a = json::parse(j.args_json, nullptr, false);
  if (!a.is_object()) return "";
  std::string out;
  if (a.contains("model") && a["model"].is_string()) out += a["model"].get<std::string>();
  if (a.contains("images")) {
    out += ' ';
    out += a["images"].dump();
  }
  if (a.contains("variant") && a["variant"].is_string()) {
    if (!out.empty()) out += ' ';
    out += "--variant ";
    out += a["variant"].get<std::string>();
  }
  return out;
}

std::string ms_text(const json& seconds) {
  if (!seconds.is_number()) return "\u2014";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", seconds.get<double>() * 1e3);
  return buf;
}

std::string number_text(const json& v) {
  if (!v.is_number()) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v.get<double>());
  return buf;
}

void report_section(std::ostringstream& o, const std::string& report_json) {
  const json r = json::parse(report_json, nullptr, false);
  if (!r.is_object()) {
    o << "<section><h2>Report</h2><p class=\"note\">The report cannot be read.</p></section>\n";
    return;
  }
  o << "<section class=\"table\" aria-labelledby=\"report-h\">\n<h2 id=\"report-h\">Report</h2>\n"
    << "<p class=\"note\">Score "
    << esc(number_text(r.value("score", json())) + " / " +
           number_text(r.value("max_score", json())));
  if (r.contains("op_time_s") && r["op_time_s"].is_number()) {
    o << " \u00b7 Op Time " << ms_text(r["op_time_s"]) << " ms ("
      << esc(r.value("ranked_variant", "")) << ", " << esc(r.value("ranked_model", "")) << ", "
      << esc(r.value("ranked_images", json(0)).dump()) << " images)";
  }
  if (!r.value("grader_error", "").empty()) {
    o << " \u00b7 grader error: " << esc(r["grader_error"].get<std::string>());
  }
  o << "</p>\n<table>\n<thead><tr><th scope=\"col\" class=\"l\">Check</th>"
    << "<th scope=\"col\" class=\"l\">Status</th><th scope=\"col\">Score</th>"
    << "<th scope=\"col\" class=\"l\">Reason</th><th scope=\"col\">Op Time (ms)</th>"
    << "<th scope=\"col\" class=\"l\">Output</th></tr></thead>\n<tbody>\n";
  for (const json& c : r.value("checks", json::array())) {
    if (!c.is_object()) continue;
    const std::string status = c.value("status", "");
    o << "<tr><td class=\"l team\">"
      << esc(c.value("name", "").empty() ? c.value("id", "") : c.value("name", ""))
      << "</td><td class=\"l\"><span class=\"state "
      << (status == "passed"   ? "done"
          : status == "failed" ? "failed"
                               : "queued")
      << "\">" << esc(status) << "</span></td><td>"
      << esc(number_text(c.value("score", json())) + "/" +
             number_text(c.value("max_score", json())))
      << "</td><td class=\"l\">" << esc(c.value("reason", "")) << "</td><td>"
      << ms_text(c.value("op_time_s", json())) << "</td><td class=\"l args\">";
    const std::string out = c.value("output", "");
    if (!out.empty()) o << "<details><summary>show</summary>" << esc(out) << "</details>";
    o << "</td></tr>\n";
  }
  o << "</tbody>\n</table>\n</section>\n";
}

}  // namespace

std::string team_page_html(const TeamPage& p) {
  bool live = false;
  for (const JobInfo& j : p.jobs) live = live || j.state == "queued" || j.state == "running";
  std::ostringstream o;
  o << page_start(p.staff ? "Every team's jobs" : "Team " + p.account,
                  "convlab \u00b7 " + std::string(p.staff ? "staff view" : "your team"),
                  live ? 10 : 0)
    << "<p class=\"sub\">"
    << (p.staff ? "Signed in as staff account " + esc(p.account) + ": every team's jobs."
                : "Your team's jobs on this server, newest first. Only your team and the "
                  "course staff can see this page.")
    << "</p>\n</header>\n";

  if (!p.deadlines.empty()) {
    o << "<section class=\"table\" aria-labelledby=\"dl-h\">\n<h2 id=\"dl-h\">Deadlines</h2>\n"
      << "<p class=\"note\">A grade job counts only when submitted before the deadline; the "
      << "last one submitted before it is the one the course records and the leaderboard ranks."
      << "</p>\n<table>\n<thead><tr><th scope=\"col\" class=\"l\">Milestone</th>"
      << "<th scope=\"col\" class=\"l\">Grades close</th><th scope=\"col\" class=\"l\">"
      << "Grade that counts</th><th scope=\"col\" class=\"l\">Leaderboard row</th></tr></thead>\n"
      << "<tbody>\n";
    for (const DeadlineRow& d : p.deadlines) {
      o << "<tr><td class=\"l\">" << esc(d.milestone) << "</td><td class=\"l\">"
        << (d.deadline.empty() ? "no deadline" : esc(d.deadline))
        << (d.extended ? " (extended for your team)" : "") << (d.passed ? ", passed" : "")
        << "</td><td class=\"l\">";
      if (d.counted_job) {
        o << "<a href=\"/team/jobs/" << *d.counted_job << "\">job " << *d.counted_job << "</a>";
      } else {
        o << "none yet";
      }
      o << "</td><td class=\"l\">";
      if (const auto it = p.labels.find(d.milestone); it != p.labels.end()) {
        o << "<a href=\"/leaderboard/" << esc(d.milestone) << "\">" << esc(it->second) << "</a>";
      } else {
        o << "not ranked";
      }
      o << "</td></tr>\n";
    }
    o << "</tbody>\n</table>\n</section>\n";
  }

  o << "<section class=\"table\" aria-labelledby=\"jobs-h\">\n<h2 id=\"jobs-h\">Jobs</h2>\n";
  if (p.jobs.empty()) {
    o << "<p class=\"empty\">No job yet: send one with <code>convlab submit check m2</code>."
      << "</p>\n</section>\n"
      << kPageEnd;
    return o.str();
  }
  o << "<table>\n<thead><tr><th scope=\"col\" class=\"l\">Job</th>";
  if (p.staff) o << "<th scope=\"col\" class=\"l\">Team</th>";
  o << "<th scope=\"col\" class=\"l\">Command</th><th scope=\"col\" class=\"l\">Arguments</th>"
    << "<th scope=\"col\" class=\"l\">State</th><th scope=\"col\">Exit</th>"
    << "<th scope=\"col\" class=\"l\">Submitted (UTC)</th>"
    << "<th scope=\"col\" class=\"l\">Finished (UTC)</th><th scope=\"col\" class=\"l\">"
    << "<span class=\"sr\">Counts</span></th></tr></thead>\n<tbody>\n";
  for (const JobInfo& j : p.jobs) {
    const auto counted = p.counted.find(j.milestone);
    const bool counts = !p.staff && counted != p.counted.end() && counted->second == j.id;
    o << "<tr id=\"job-" << j.id << "\"><td class=\"l\"><a href=\"/team/jobs/" << j.id << "\">"
      << j.id << "</a></td>";
    if (p.staff) o << "<td class=\"l\">" << esc(j.team) << "</td>";
    o << "<td class=\"l\">" << esc(j.command + " " + j.milestone) << "</td><td class=\"l args\">"
      << esc(args_text(j)) << "</td><td class=\"l\">" << state_html(j);
    if (!j.error.empty()) o << ": " << esc(j.error);
    o << "</td><td>" << (j.exit_code ? std::to_string(*j.exit_code) : "") << "</td><td class=\"l\">"
      << esc(j.submitted_at) << "</td><td class=\"l\">" << esc(j.finished_at)
      << "</td><td class=\"l\">" << (counts ? "<span class=\"counts\">counts</span>" : "")
      << "</td></tr>\n";
  }
  o << "</tbody>\n</table>\n</section>\n" << kPageEnd;
  return o.str();
}

std::string job_page_html(const JobInfo& j, bool counts, const std::string& output,
                          const std::optional<std::string>& report_json) {
  const bool live = j.state == "queued" || j.state == "running";
  std::ostringstream o;
  o << page_start("Job " + std::to_string(j.id) + ": " + j.command + " " + j.milestone,
                  "convlab \u00b7 team " + j.team, live ? 5 : 0)
    << "<p class=\"sub\">" << state_html(j);
  if (j.exit_code) o << ", exit status " << *j.exit_code;
  if (!j.error.empty()) o << ": " << esc(j.error);
  o << " \u00b7 submitted " << esc(j.submitted_at);
  if (!j.finished_at.empty()) o << " \u00b7 finished " << esc(j.finished_at);
  if (counts) {
    o << " \u00b7 <span class=\"counts\">counts</span> the team's grade that counts on "
      << esc(j.milestone);
  }
  o << " \u00b7 <a href=\"/team\">all your jobs</a></p>\n</header>\n";
  if (report_json) report_section(o, *report_json);
  o << "<section aria-labelledby=\"out-h\">\n<h2 id=\"out-h\">Output</h2>\n";
  if (output.empty()) {
    o << "<p class=\"note\">Nothing yet" << (live ? ": this page reloads every 5 s." : ".")
      << "</p>\n";
  } else {
    o << "<pre class=\"output\">" << esc(output) << "</pre>\n";
  }
  o << "</section>\n" << kPageEnd;
  return o.str();
}

std::string index_page_html(const std::vector<std::string>& milestones) {
  std::ostringstream o;
  o << page_start("convlab submission service", "convlab", 0) << "</header>\n"
    << "<section>\n<h2>Leaderboards</h2>\n<p class=\"note\">Anonymised, served live from the "
    << "results database.</p>\n<ul>\n";
  for (const std::string& m : milestones) {
    o << "<li><a href=\"/leaderboard/" << esc(m) << "\">milestone " << esc(m) << "</a></li>\n";
  }
  o << "</ul>\n</section>\n<section>\n<h2>Your team's jobs</h2>\n<p>Run <code>convlab submit "
    << "history</code> in your checkout: it prints a link that opens your team's page here."
    << "</p>\n</section>\n"
    << kPageEnd;
  return o.str();
}

std::string message_page_html(const std::string& title, const std::string& text) {
  return page_start(title, "convlab", 0) + "<p class=\"sub\">" + esc(text) + "</p>\n</header>\n" +
         kPageEnd;
}

}  // namespace convlab::service
