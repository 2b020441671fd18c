#include "grader/service/server.hpp"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "grader/db/results_db.hpp"
#include "grader/leaderboard/leaderboard.hpp"
#include "grader/service/job_request.hpp"
#include "grader/service/pages.hpp"
#include "grader/service/tokens.hpp"
#include "reference/core/error.hpp"
#include "reference/milestones/milestone.hpp"

namespace convlab::service {
namespace fs = std::filesystem;
using httplib::Request;
using httplib::Response;
using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void reply(Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body) + "\n", "application/json");
}

void fail(Response& res, int status, const std::string& message) {
  reply(res, status, {{"error", message}});
}

// A job as the API shows it; `counts`: it is its team's submission that counts on its
// milestone (the last grade before the deadline that recorded a run).
json job_json(const JobInfo& j, int position, bool counts) {
  json out = {{"id", j.id},
              {"team", j.team},
              {"command", j.command},
              {"milestone", j.milestone},
              {"device", j.device},
              {"args", json::parse(j.args_json, nullptr, false)},
              {"state", j.state},
              {"attempts", j.attempts},
              {"exit_code", j.exit_code ? json(*j.exit_code) : json(nullptr)},
              {"error", j.error},
              {"submitted_at", j.submitted_at},
              {"started_at", j.started_at},
              {"finished_at", j.finished_at},
              {"has_report", j.has_report}};
  if (j.state == "queued") out["position"] = position;
  if (j.command == "grade") out["counts"] = counts;
  return out;
}

// An HTML page. `private_page`: a team's own page, which no cache may keep.
void page(Response& res, int status, const std::string& html, bool private_page) {
  res.status = status;
  // The header form of the pages' policy also forbids framing them (clickjacking).
  res.set_header("Content-Security-Policy",
                 "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  if (private_page) res.set_header("Cache-Control", "no-store");
  res.set_content(html, "text/html; charset=utf-8");
}

// The value of cookie `name` in the request, or "".
std::string cookie(const Request& req, const std::string& name) {
  const std::string header = req.get_header_value("Cookie");
  std::size_t at = 0;
  while (at < header.size()) {
    const std::size_t end = std::min(header.find(';', at), header.size());
    std::string part = header.substr(at, end - at);
    part.erase(0, part.find_first_not_of(' '));
    if (part.starts_with(name + "=")) return part.substr(name.size() + 1);
    at = end + 1;
  }
  return "";
}

constexpr const char* kSessionCookie = "convlab_session";

// Each request holds one of these threads, a stream for as long as its job runs.
constexpr int kHttpThreads = 128;
// Streams open at once: per account, and in all (the rest of the threads answer the API).
constexpr int kStreamsPerAccount = 8;
constexpr int kStreams = kHttpThreads - 16;
// The most output one stream event carries.
constexpr std::size_t kEventBytes = 256u << 10;

// The first `max` bytes of `text`, or fewer so that no UTF-8 character is cut.
std::size_t utf8_prefix(const std::string& text, std::size_t max) {
  if (text.size() <= max) return text.size();
  std::size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return n == 0 ? max : n;
}

// What a team reads of its report: hidden models stay unnamed, their outputs unseen.
std::string team_report(const std::string& report) {
  json j = json::parse(report, nullptr, false);
  if (!j.is_object() || !j.contains("checks") || !j["checks"].is_array()) return report;
  for (json& c : j["checks"]) {
    if (!c.value("hidden", false)) continue;
    c["model"] = "hidden";
    c["output"] = "";
    c["details"] = nullptr;
  }
  j.erase("submission");
  return dump(j);
}

}  // namespace

struct Server::Impl {
  JobStore& store;
  Executors& executors;
  ApiSettings settings;
  LoginLimiter limiter;
  std::set<std::string> staff;
  std::set<std::string> roster;
  httplib::Server http;
  std::atomic<std::int64_t> staging_counter{0};
  PageSessions sessions;
  std::mutex streams_mutex;
  std::map<std::string, int> streams;  // open streams per account
  int streams_total = 0;
  std::atomic<bool> stopping{false};  // open streams end within a second
  std::mutex results_mutex;  // one handle on the results database, for the leaderboard pages
  std::unique_ptr<grader::ResultsDb> results;

  Impl(JobStore& s, Executors& e, ApiSettings a)
      : store(s), executors(e), settings(std::move(a)), limiter(settings.max_failed_logins) {
    for (const Account& acc : settings.roster) {
      roster.insert(acc.name);
      if (acc.staff) staff.insert(acc.name);
    }
    if (!settings.db.empty()) results = std::make_unique<grader::ResultsDb>(settings.db);
  }

  // The anonymised board of `milestone`; `labels` (when given) gets team -> its label there.
  grader::Leaderboard board(const std::string& milestone,
                            std::map<std::string, std::string>* labels = nullptr) {
    const grader::RankingRule rule = grader::load_ranking_rule(settings.root, milestone);
    const std::lock_guard lock(results_mutex);
    const auto teams = results->best_per_team(milestone);
    grader::Leaderboard shown =
        grader::rank_teams(milestone, teams, rule, results->anonymize_key());
    if (labels != nullptr) {
      // Both boards sort by time, then by real name: their rows line up.
      const grader::Leaderboard named = grader::rank_teams(milestone, teams, rule);
      for (std::size_t i = 0; i < named.rows.size(); ++i) {
        (*labels)[named.rows[i].team] = shown.rows[i].team;
      }
    }
    return shown;
  }

  bool graded_milestone(const std::string& milestone) {
    const auto graded = graded_milestone_ids(settings.root);
    return std::find(graded.begin(), graded.end(), milestone) != graded.end();
  }

  // The account looking at a page: its session cookie, or a token in the header. Else the
  // response is set: a page that says how to get in.
  std::optional<std::string> page_account(const Request& req, Response& res) {
    if (req.has_header("Authorization")) return authenticate(req, res);
    if (const auto owner = sessions.owner(cookie(req, kSessionCookie))) {
      // A token issued anew, or an account taken off the roster, ends the session.
      if (store.team_of_digest(owner->digest) == owner->account &&
          roster.contains(owner->account)) {
        return owner->account;
      }
    }
    page(res, 401,
         message_page_html("Sign in to see your team's page",
                           "Run `convlab submit history` in your checkout and open the link it "
                           "prints; it works once, within 5 minutes."),
         true);
    return std::nullopt;
  }

  // GET /team: the account's history.
  void team_page(const Request& req, Response& res) {
    const auto account = page_account(req, res);
    if (!account) return;
    TeamPage p;
    p.account = *account;
    p.staff = staff.contains(*account);
    p.jobs = store.list(p.staff ? "" : *account, 200);
    if (!p.staff) {
      p.counted = store.counted_jobs(*account);
      std::set<std::string> milestones;
      for (const auto& [m, at] : settings.deadlines) milestones.insert(m);
      for (const auto& [m, id] : p.counted) milestones.insert(m);
      const UnixTime now = unix_now();
      for (const std::string& m : milestones) {
        DeadlineRow row;
        row.milestone = m;
        if (const auto d = deadline_of(*account, m)) {
          row.deadline = utc_text(d->at);
          row.extended = d->extended;
          row.passed = now > d->at;
        }
        if (const auto it = p.counted.find(m); it != p.counted.end()) row.counted_job = it->second;
        if (results) {
          std::map<std::string, std::string> labels;
          board(m, &labels);
          if (const auto it = labels.find(*account); it != labels.end()) {
            p.labels[m] = it->second;
          }
        }
        p.deadlines.push_back(row);
      }
    }
    page(res, 200, team_page_html(p), true);
  }

  // GET /team/jobs/ID: one job of the account's.
  void job_page(const Request& req, Response& res) {
    const auto account = page_account(req, res);
    if (!account) return;
    std::optional<JobInfo> job;
    try {
      job = store.get(std::stoll(req.matches[1]));
    } catch (const std::out_of_range&) {
    }
    const bool is_staff = staff.contains(*account);
    if (!job || (job->team != *account && !is_staff)) {
      return page(
          res, 404,
          message_page_html("No such job", "Job " + req.matches[1].str() + " is not one of team " +
                                               *account + "'s jobs."),
          true);
    }
    const auto counted = store.counted_jobs(job->team);
    const auto it = counted.find(job->milestone);
    const auto report = store.report(job->id);
    page(res, 200,
         job_page_html(*job, it != counted.end() && it->second == job->id,
                       store.output(job->id, 0).text,
                       report && !is_staff ? std::optional(team_report(*report)) : report),
         true);
  }

  // GET /leaderboard/M: the live, anonymised leaderboard (?format=text: as text).
  void leaderboard_page(const Request& req, Response& res) {
    const std::string milestone = req.matches[1];
    const bool text = req.get_param_value("format") == "text";
    if (!graded_milestone(milestone)) {
      if (text) return fail(res, 404, "milestone " + milestone + " has no leaderboard");
      return page(res, 404,
                  message_page_html("No such leaderboard",
                                    "Milestone " + milestone + " has no leaderboard."),
                  false);
    }
    if (!results) return fail(res, 503, "this server has no results database");
    const grader::Leaderboard b = board(milestone);
    if (text) {
      res.set_content(grader::leaderboard_text(b), "text/plain; charset=utf-8");
      return;
    }
    page(res, 200, grader::leaderboard_html(b, 60), false);
  }

  // Counts a stream of `account` open; false when a limit is reached.
  bool open_stream(const std::string& account) {
    const std::lock_guard lock(streams_mutex);
    if (streams_total >= kStreams || streams[account] >= kStreamsPerAccount) return false;
    ++streams_total;
    ++streams[account];
    return true;
  }
  void close_stream(const std::string& account) {
    const std::lock_guard lock(streams_mutex);
    --streams_total;
    if (--streams[account] == 0) streams.erase(account);
  }

  // The byte offset a client resumes its job's output from (`from`, default 0); nullopt after
  // a 400 reply when it is not a number.
  static std::optional<std::int64_t> from_param(const Request& req, Response& res) {
    if (!req.has_param("from")) return 0;
    try {
      return std::stoll(req.get_param_value("from"));
    } catch (const std::exception&) {
      fail(res, 400, "from must be a byte offset");
      return std::nullopt;
    }
  }

  // GET /api/v1/jobs/ID/stream?from=N: the job's output from byte N, sent as it grows, one
  // JSON object per line (application/x-ndjson):
  //   {"state": "queued", "position": 3}  on every change of state or place in the queue
  //   {"output": "...", "next": N}        output; N is the offset to resume from
  //   {"keepalive": true}                 after --keepalive seconds of silence (15)
  //   {"end": true, "state": "done", "exit_code": 0, "error": ""}   last, then the stream ends
  void stream(const Request& req, Response& res) {
    const auto team = authenticate(req, res);
    if (!team) return;
    const auto job = visible_job(*team, req.matches[1], res);
    if (!job) return;
    const auto from = from_param(req, res);
    if (!from) return;
    if (!open_stream(*team)) {
      res.set_header("Retry-After", "5");
      return fail(res, 503,
                  "too many output streams open (" + std::to_string(kStreamsPerAccount) +
                      " per team, " + std::to_string(kStreams) +
                      " on the server): close a `convlab submit output` you no longer need");
    }
    struct Follow {
      std::int64_t next;
      std::string state;
      int position = -1;
      std::chrono::steady_clock::time_point last_sent = std::chrono::steady_clock::now();
    };
    auto f = std::make_shared<Follow>(Follow{std::max<std::int64_t>(*from, 0), "", -1});
    const std::int64_t id = job->id;
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Accel-Buffering", "no");  // nginx: pass each chunk on at once
    res.set_chunked_content_provider(
        "application/x-ndjson",
        [this, id, f](std::size_t, httplib::DataSink& sink) {
          const auto send = [&](const json& event) {
            const std::string line = dump(event) + "\n";
            f->last_sent = std::chrono::steady_clock::now();
            return sink.write(line.data(), line.size());
          };
          for (;;) {
            const std::uint64_t seen = store.generation();
            // The state before the output: a job seen finished has all its output here.
            const auto now = store.get(id);
            if (!now) return false;
            bool sent = false;
            const int position = now->state == "queued" ? store.position(id) : 0;
            if (now->state != f->state || position != f->position) {
              f->state = now->state;
              f->position = position;
              json event = {{"state", now->state}};
              if (now->state == "queued") event["position"] = position;
              if (!send(event)) return false;
              sent = true;
            }
            OutputSlice slice = store.output(id, f->next);
            if (!slice.text.empty()) {
              const std::size_t n = utf8_prefix(slice.text, kEventBytes);
              f->next += static_cast<std::int64_t>(n);
              if (!send({{"output", slice.text.substr(0, n)}, {"next", f->next}})) return false;
              if (n < slice.text.size()) return true;  // the rest in the next call
              sent = true;
            } else if (now->state == "done" || now->state == "failed") {
              const bool ok =
                  send({{"end", true},
                        {"state", now->state},
                        {"exit_code", now->exit_code ? json(*now->exit_code) : json(nullptr)},
                        {"error", now->error}});
              sink.done();
              return ok;
            }
            if (sent) return true;
            if (std::chrono::steady_clock::now() - f->last_sent >= settings.keepalive) {
              return send({{"keepalive", true}});
            }
            store.wait_for_change(seen, std::chrono::milliseconds(1000));
            if (stopping || !sink.is_writable()) return false;
          }
        },
        [this, account = *team](bool) { close_stream(account); });
  }

  // POST /api/v1/jobs/ID/cancel: the team (or staff) stops a job.
  void cancel(const Request& req, Response& res) {
    const auto team = authenticate(req, res);
    if (!team) return;
    const auto job = visible_job(*team, req.matches[1], res);
    if (!job) return;
    const std::string outcome = store.cancel(job->id);
    if (outcome != "cancelled" && outcome != "cancelling") {
      return fail(res, 409,
                  "job " + req.matches[1].str() + " has already ended (" + outcome +
                      "): there is nothing to cancel");
    }
    std::cout << "convlab serve: " << *team << " cancelled job " << job->id << std::endl;
    json body = shown(*store.get(job->id));
    body["cancel"] = outcome;
    reply(res, 200, body);
  }

  // POST /api/v1/page-link: a one-time link to the caller's pages.
  void page_link(const Request& req, Response& res) {
    const auto account = authenticate(req, res);
    if (!account) return;
    const std::string header = req.get_header_value("Authorization");
    const std::string key =
        sessions.new_link({*account, token_digest(header.substr(std::string("Bearer ").size()))});
    reply(res, 200,
          {{"url", "/login/" + key},
           {"expires_in_s", PageSessions::kLinkLife.count()},
           {"team", *account}});
  }

  // GET /login/KEY: spends a link; the session goes into a cookie only this site reads.
  void login_page(const Request& req, Response& res) {
    const auto session = sessions.redeem(req.matches[1]);
    if (!session) {
      return page(res, 401,
                  message_page_html("This link no longer works",
                                    "A link works once, within 5 minutes: run `convlab submit "
                                    "history` again for a new one."),
                  true);
    }
    std::string value = std::string(kSessionCookie) + "=" + *session +
                        "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" +
                        std::to_string(PageSessions::kSessionLife.count());
    // Behind the TLS proxy the browser must never send it in clear text.
    if (req.get_header_value("X-Forwarded-Proto") == "https") value += "; Secure";
    res.set_header("Set-Cookie", value);
    res.set_header("Cache-Control", "no-store");
    // ?job=ID opens that job's page; nothing else is followed (no open redirect).
    const std::string job = req.get_param_value("job");
    const bool to_job =
        !job.empty() && job.size() < 19 && job.find_first_not_of("0123456789") == std::string::npos;
    res.set_redirect(to_job ? "/team/jobs/" + job : "/team", 303);
  }

  // The caller's account, or nullopt with the response already set (401, 429).
  std::optional<std::string> authenticate(const Request& req, Response& res) {
    const std::string& address = req.remote_addr;
    if (const int wait = limiter.blocked_for(address); wait > 0) {
      res.set_header("Retry-After", std::to_string(wait));
      fail(res, 429,
           "too many failed logins from " + address + "; try again in " + std::to_string(wait) +
               " s with the token your course staff gave you");
      return std::nullopt;
    }
    const std::string header = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (!header.starts_with(prefix)) {
      fail(res, 401, "no token: run `convlab submit login --server URL --token TOKEN` first");
      return std::nullopt;
    }
    const auto team = store.team_of_digest(token_digest(header.substr(prefix.size())));
    if (!team || !roster.contains(*team)) {
      limiter.failed(address);
      fail(res, 401, "the token is not valid (or no longer): ask your course staff for yours");
      return std::nullopt;
    }
    return team;
  }

  // `team`'s deadline on `milestone`, its extension counted; nullopt: the milestone has none.
  std::optional<TeamDeadline> deadline_of(const std::string& team, const std::string& milestone) {
    std::optional<UnixTime> extension;
    const auto extensions = store.extensions(team);
    if (const auto it = extensions.find(milestone); it != extensions.end()) {
      extension = parse_time(it->second);
    }
    return team_deadline(settings.deadlines, milestone, extension);
  }

  json shown(const JobInfo& j) {
    const auto counted = store.counted_jobs(j.team);
    const auto it = counted.find(j.milestone);
    return job_json(j, store.position(j.id), it != counted.end() && it->second == j.id);
  }

  void refuse_late(Response& res, const std::string& team, const std::string& milestone,
                   const TeamDeadline& deadline) {
    std::string text = "the deadline of milestone " + milestone + " was " + utc_text(deadline.at) +
                       (deadline.extended ? " (your team's extension)" : "") +
                       "; grade jobs for it are closed (check and run still work). ";
    const auto counted = store.counted_jobs(team);
    if (const auto it = counted.find(milestone); it != counted.end()) {
      text += "Your grade that counts is job " + std::to_string(it->second) +
              ", your last one before the deadline. ";
    } else {
      text += "Your team has no grade of " + milestone + " recorded. ";
    }
    text += "If you need more time, ask your course staff for an extension.";
    fail(res, 403, text);
  }

  // GET /api/v1/deadlines: every milestone with a deadline (or a grade that counts) for the
  // caller, and where it stands.
  void deadlines(const Request& req, Response& res) {
    const auto team = authenticate(req, res);
    if (!team) return;
    const auto counted = store.counted_jobs(*team);
    std::set<std::string> milestones;
    for (const auto& [m, at] : settings.deadlines) milestones.insert(m);
    for (const auto& [m, id] : counted) milestones.insert(m);
    json list = json::array();
    const UnixTime now = unix_now();
    for (const std::string& m : milestones) {
      json row = {{"milestone", m}};
      if (const auto d = deadline_of(*team, m)) {
        row["deadline"] = utc_text(d->at);
        row["deadline_iso"] = iso_utc(d->at);
        row["extended"] = d->extended;
        row["passed"] = now > d->at;
      } else {
        row["deadline"] = nullptr;
      }
      const auto it = counted.find(m);
      row["counted_job"] = it == counted.end() ? json(nullptr) : json(it->second);
      list.push_back(row);
    }
    reply(res, 200, {{"team", *team}, {"now", utc_text(now)}, {"deadlines", list}});
  }

  // POST /api/v1/extensions (staff): {"team", "milestone", "until"}.
  void extend(const Request& req, Response& res) {
    const auto caller = authenticate(req, res);
    if (!caller) return;
    if (!staff.contains(*caller)) {
      return fail(res, 403, "only course staff may extend a deadline: ask them");
    }
    const json body = json::parse(req.body, nullptr, false);
    const auto field = [&](const char* key) {
      return body.is_object() && body.contains(key) && body[key].is_string()
                 ? body[key].get<std::string>()
                 : std::string();
    };
    const std::string team = field("team"), milestone = field("milestone"), until = field("until");
    if (team.empty() || milestone.empty() || until.empty()) {
      return fail(res, 400,
                  "give {\"team\": ..., \"milestone\": ..., \"until\": "
                  "\"2026-03-08T23:59:00Z\"}");
    }
    if (!roster.contains(team)) return fail(res, 422, "'" + team + "' is not in the roster");
    const auto graded = graded_milestone_ids(settings.root);
    if (std::find(graded.begin(), graded.end(), milestone) == graded.end()) {
      return fail(res, 422, "unknown milestone '" + milestone + "'");
    }
    UnixTime at = 0;
    try {
      at = parse_time(until);
    } catch (const Error& e) {
      return fail(res, 422, e.what());
    }
    store.set_extension(team, milestone, iso_utc(at), *caller);
    std::cout << "convlab serve: " << *caller << " extended " << team << "'s deadline of "
              << milestone << " to " << utc_text(at) << std::endl;
    json out = {{"team", team}, {"milestone", milestone}, {"extension", utc_text(at)}};
    if (const auto d = deadline_of(team, milestone)) {
      out["deadline"] = utc_text(d->at);
      out["extended"] = d->extended;
      if (!d->extended) out["note"] = "the milestone's own deadline is later: it stays";
    } else {
      out["deadline"] = nullptr;
      out["note"] = "milestone " + milestone + " has no deadline on this server";
    }
    reply(res, 200, out);
  }

  // The job `id` if `team` may see it; else the response is set (404).
  std::optional<JobInfo> visible_job(const std::string& team, const std::string& id_text,
                                     Response& res) {
    std::optional<JobInfo> job;
    try {
      job = store.get(std::stoll(id_text));
    } catch (const std::out_of_range&) {
    }
    if (!job || (job->team != team && !staff.contains(team))) {
      fail(res, 404, "no job " + id_text + " of team " + team);
      return std::nullopt;
    }
    return job;
  }

  void submit(const Request& req, Response& res) {
    const auto team = authenticate(req, res);
    if (!team) return;
    JobSpec spec;
    try {
      spec = parse_job_request(req.body, *team, settings.root);
    } catch (const RequestError& e) {
      return fail(res, e.status(), e.what());
    }
    std::optional<TeamDeadline> deadline;
    if (spec.command == "grade") {
      deadline = deadline_of(*team, spec.milestone);
      if (deadline && unix_now() > deadline->at) {
        return refuse_late(res, *team, spec.milestone, *deadline);
      }
    }
    if (spec.device == "gpu" && !settings.gpu_jobs) {
      return fail(res, 422, "this server runs no GPU jobs, and milestone " + spec.milestone +
                                " needs a GPU: ask your course staff");
    }
    const auto over_limit = [&](int in_flight) {
      fail(res, 429,
           "team " + *team + " has " + std::to_string(in_flight) +
               " jobs queued or running; the limit is " + std::to_string(settings.max_in_flight) +
               ": wait for one to finish (convlab submit status)");
    };
    // Early, before the files are looked at; enqueue_within has the last word.
    if (const int n = store.in_flight(*team); n >= settings.max_in_flight) return over_limit(n);
    // The grader's own file rules, on the files as they will be laid out for the job.
    const fs::path stage = settings.staging / ("upload-" + std::to_string(++staging_counter));
    std::vector<std::string> problems;
    try {
      fs::remove_all(stage);  // left by a server that stopped half-way
      write_job_files(spec.files, stage);
      problems = upload_problems(stage, spec.milestone, settings.root);
    } catch (...) {
      std::error_code ec;
      fs::remove_all(stage, ec);
      throw;
    }
    std::error_code ec;
    fs::remove_all(stage, ec);
    if (!problems.empty()) {
      std::string text = "the upload is refused:";
      for (const std::string& p : problems) text += "\n  " + p;
      return fail(res, 422, text);
    }
    const JobStore::Admission admitted =
        store.admit(spec, settings.max_in_flight, settings.max_per_hour);
    if (!admitted.id) {
      if (admitted.in_flight >= settings.max_in_flight) return over_limit(admitted.in_flight);
      std::string when = admitted.hour_frees_at;
      int wait_s = 60;
      try {
        const UnixTime at = parse_time(admitted.hour_frees_at);
        when = utc_text(at);
        wait_s = static_cast<int>(std::max<UnixTime>(1, at - unix_now()));
      } catch (const Error&) {
      }
      res.set_header("Retry-After", std::to_string(wait_s));
      return fail(res, 429,
                  "team " + *team + " has submitted " + std::to_string(admitted.last_hour) +
                      " jobs in the last hour; the limit is " +
                      std::to_string(settings.max_per_hour) +
                      " an hour: the next is accepted from " + when + " (in " +
                      std::to_string((wait_s + 59) / 60) + " min)");
    }
    executors.notify();
    json body = shown(*store.get(*admitted.id));
    body["limit_in_flight"] = settings.max_in_flight;
    body["limit_per_hour"] = settings.max_per_hour;
    body["jobs_last_hour"] = admitted.last_hour + 1;
    if (deadline) {
      body["deadline"] = utc_text(deadline->at);
      body["extended"] = deadline->extended;
    }
    reply(res, 201, body);
  }

  void routes() {
    http.set_payload_max_length(kMaxBodyBytes);
    // A client following its job keeps its connection open between polls and holds a worker
    // meanwhile: with the library's default pool (8 workers) every further follower waits.
    http.new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
    http.set_error_handler(httplib::Server::HandlerWithResponse([](const Request&,
                                                                   Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      const std::string why =
          res.status == 413 ? "the upload is larger than " +
                                  std::to_string(kMaxBodyBytes >> 20) +
                                  " MiB: send your source files only"
          : res.status == 404 ? "no such endpoint; update convlab (convlab submit) or check "
                                "the server address"
                              : "the request failed (HTTP " + std::to_string(res.status) + ")";
      fail(res, res.status, why);
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const Request&, Response& res, std::exception_ptr ep) {
      std::string what = "unknown";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      std::cerr << "convlab serve: internal error: " << what << std::endl;
      fail(res, 500, "the server failed on this request; tell your course staff: " + what);
    });
    http.Get("/api/v1/health", [](const Request&, Response& res) {
      res.set_content("ok\n", "text/plain");
    });
    http.Post("/api/v1/jobs", [this](const Request& req, Response& res) { submit(req, res); });
    http.Post("/api/v1/page-link",
              [this](const Request& req, Response& res) { page_link(req, res); });
    const auto index = [this](const Request&, Response& res) {
      page(res, 200, index_page_html(graded_milestone_ids(settings.root)), false);
    };
    http.Get("/", index);
    http.Get("/leaderboard", index);
    http.Get(R"(/leaderboard/([A-Za-z0-9_.-]+))",
             [this](const Request& req, Response& res) { leaderboard_page(req, res); });
    http.Get(R"(/login/([0-9a-f]+))",
             [this](const Request& req, Response& res) { login_page(req, res); });
    http.Get("/team", [this](const Request& req, Response& res) { team_page(req, res); });
    http.Get(R"(/team/jobs/(\d+))",
             [this](const Request& req, Response& res) { job_page(req, res); });
    http.Get("/api/v1/deadlines",
             [this](const Request& req, Response& res) { deadlines(req, res); });
    http.Post("/api/v1/extensions",
              [this](const Request& req, Response& res) { extend(req, res); });
    http.Get("/api/v1/jobs", [this](const Request& req, Response& res) {
      const auto team = authenticate(req, res);
      if (!team) return;
      json jobs = json::array();
      for (const JobInfo& j : store.list(staff.contains(*team) ? "" : *team, 100)) {
        jobs.push_back(shown(j));
      }
      reply(res, 200, {{"team", *team}, {"jobs", jobs}, {"limit_in_flight", settings.max_in_flight}});
    });
    http.Get(R"(/api/v1/jobs/(\d+))", [this](const Request& req, Response& res) {
      const auto team = authenticate(req, res);
      if (!team) return;
      if (const auto job = visible_job(*team, req.matches[1], res)) {
        reply(res, 200, shown(*job));
      }
    });
    http.Get(R"(/api/v1/jobs/(\d+)/output)", [this](const Request& req, Response& res) {
      const auto team = authenticate(req, res);
      if (!team) return;
      const auto job = visible_job(*team, req.matches[1], res);
      if (!job) return;
      const auto from = from_param(req, res);
      if (!from) return;
      // The state is read before the output: a job seen finished has all its output here.
      const auto now = store.get(job->id);
      const OutputSlice slice = store.output(job->id, *from);
      res.set_header("X-Convlab-Next", std::to_string(slice.next));
      res.set_header("X-Convlab-State", now->state);
      if (now->exit_code) res.set_header("X-Convlab-Exit", std::to_string(*now->exit_code));
      if (now->state == "queued") {
        res.set_header("X-Convlab-Position", std::to_string(store.position(job->id)));
      }
      res.set_content(slice.text, "text/plain; charset=utf-8");
    });
    http.Post(R"(/api/v1/jobs/(\d+)/cancel)",
              [this](const Request& req, Response& res) { cancel(req, res); });
    http.Get(R"(/api/v1/jobs/(\d+)/stream)",
             [this](const Request& req, Response& res) { stream(req, res); });
    http.Get(R"(/api/v1/jobs/(\d+)/report)", [this](const Request& req, Response& res) {
      const auto team = authenticate(req, res);
      if (!team) return;
      const auto job = visible_job(*team, req.matches[1], res);
      if (!job) return;
      const auto report = store.report(job->id);
      if (!report) return fail(res, 404, "job " + req.matches[1].str() + " has no report (yet)");
      res.set_content(staff.contains(*team) ? *report : team_report(*report), "application/json");
    });
  }
};

Server::Server(JobStore& store, Executors& executors, ApiSettings settings)
    : impl_(std::make_unique<Impl>(store, executors, std::move(settings))) {
  fs::create_directories(impl_->settings.staging);
  impl_->routes();
}

Server::~Server() = default;

int Server::bind(const std::string& host, int port) {
  if (port == 0) {
    const int bound = impl_->http.bind_to_any_port(host);
    if (bound < 0) throw Error("cannot listen on " + host + ": no free port");
    return bound;
  }
  if (!impl_->http.bind_to_port(host, port)) {
    throw Error("cannot listen on " + host + ":" + std::to_string(port) +
                ": is the port in use, or below 1024? choose another with --port");
  }
  return port;
}

void Server::listen() { impl_->http.listen_after_bind(); }

void Server::stop() {
  impl_->stopping = true;
  impl_->http.stop();
}

}  // namespace convlab::service
