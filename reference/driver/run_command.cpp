#include "reference/driver/run_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "datasets/fashion_mnist.hpp"
#include "reference/conv/library_conv.hpp"
#include "reference/core/error.hpp"
#include "reference/driver/format.hpp"
#include "reference/driver/milestone.hpp"
#include "reference/model/model.hpp"
#include "reference/network/network.hpp"
#include "reference/profile/report.hpp"

#ifdef CONVLAB_HAVE_CUDA
#include "reference/device/peak.hpp"
#include "reference/conv/cudnn_conv.hpp"
#include "reference/core/cuda_check.hpp"
#include "reference/network/network_gpu.hpp"
#include "reference/profile/profiler.hpp"
#endif

namespace convlab {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// One convolution run through the whole network.
struct RunRecord {
  std::string label;          // variant name, or the library convolution's name
  std::string code_file;      // where its code lives (for advice)
  std::string status = "ok";  // ok, not_implemented, error
  std::string error;
  NetworkRun run;
  std::int64_t correct = 0;
  std::optional<std::int64_t> expected;
  bool reference = false;  // a library row shown for comparison, not the team's code
};

json shape_json(const ConvShape& s) {
  return {{"B", s.B}, {"M", s.M}, {"C", s.C}, {"H", s.H}, {"W", s.W}, {"K", s.K}};
}

double flops_of(const NetworkRun& run) {
  double f = 0.0;
  for (const ConvLayerTime& t : run.conv_layers) f += t.shape.flops();
  return f;
}

// Runs `body` and records its outcome; a stub or a failing kernel marks that run, not the
// whole command, when several runs share one invocation.
template <typename Body>
void attempt(RunRecord& rec, bool keep_going, Body body) {
  try {
    rec.run = body();
  } catch (const NotImplemented& e) {
    if (!keep_going) throw;
    rec.status = "not_implemented";
    rec.error = e.what();
  } catch (const Error& e) {
    if (!keep_going) throw;
    rec.status = "error";
    rec.error = e.what();
  }
}

// The staff solution of a student file mirrors its path: student/X -> reference/solutions/X.
[[maybe_unused]] std::string solution_file(std::string_view student_file) {
  constexpr std::string_view prefix = "student/";
  if (student_file.starts_with(prefix)) student_file.remove_prefix(prefix.size());
  return "reference/solutions/" + std::string(student_file);
}

// The command a profile describes, as nvprof's "Profiling application:" line showed it.
std::string profiled_command(const RunOptions& opt, const std::string& milestone,
                             const std::string& model, std::int64_t n) {
  std::string cmd = "convlab run " + milestone + " " + model + " " + std::to_string(n);
  if (opt.device) cmd += " --device " + *opt.device;
  if (opt.variant) cmd += " --variant " + *opt.variant;
  cmd += " --impl " + std::string(impl_name(opt.impl));
  if (opt.runs != 1) cmd += " --runs " + std::to_string(opt.runs);
  return cmd;
}

// The conv layers of `run` whose timed call also computed the tanh and max-pool after them
// ("0, 3"), or "" when none did.
std::string fused_layers(const NetworkRun& run) {
  std::string list;
  for (const ConvLayerTime& t : run.conv_layers) {
    if (t.fused.empty()) continue;
    list += (list.empty() ? "" : ", ") + std::to_string(t.layer);
  }
  return list;
}

}  // namespace

// `fuse` false is --no-fuse: every conv layer is timed alone, even where the variant has a
// fused conv + tanh + max-pool launcher.
static int run_milestone_fusing(const RunOptions& opt, [[maybe_unused]] bool fuse,
                                std::ostream& out, std::ostream& err) {
  const auto wall_start = std::chrono::steady_clock::now();
  const fs::path root = convlab_root();
  const Milestone ms = load_milestone(root, opt.milestone);

  const std::string device = opt.device.value_or(ms.default_device);
  if (std::find(ms.devices.begin(), ms.devices.end(), device) == ms.devices.end()) {
    throw Error("milestone " + ms.id + " runs on " + ms.devices.front() +
                " only; --device chooses between cpu and gpu for m1");
  }
#ifndef CONVLAB_HAVE_CUDA
  if (device == "gpu") {
    throw Error("this convlab was built without CUDA, so milestone " + ms.id +
                " cannot run here. Build with the default preset on a machine with the CUDA "
                "toolkit (cmake --preset default), or run m1 --device cpu or m2.");
  }
#endif
  const bool profiling = opt.profile || opt.profile_json.has_value();
  if (profiling && device != "gpu") {
    throw Error("--profile records GPU activity, and milestone " + ms.id +
                (ms.id == "m1" ? " --device cpu" : "") +
                " runs on the CPU. Profile a GPU run: m1 --device gpu, m3 or final.");
  }
  if (opt.variant && ms.variants.empty()) {
    throw Error("--variant applies to m3 and final; milestone " + ms.id + " has no variants");
  }

  // Every option is checked before any data is loaded.
  if (opt.runs < 1 || opt.runs > 100) {
    throw Error("--runs must be between 1 and 100, got " + std::to_string(opt.runs));
  }
  if (opt.images && *opt.images < 1) {
    throw Error("N must be between 1 and the size of the test set (10000), got " +
                std::to_string(*opt.images));
  }
  for (const fs::path& d : opt.model_dirs) {
    if (!fs::is_directory(d)) {
      throw Error("--models " + d.string() + " is not a directory (it holds *.safetensors model "
                  "files)");
    }
  }
  if (opt.variant && *opt.variant != "all" &&
      std::find(ms.variants.begin(), ms.variants.end(), *opt.variant) == ms.variants.end()) {
    std::string list;
    for (const std::string& v : ms.variants) list += (list.empty() ? "" : ", ") + v;
    throw Error("variant " + *opt.variant + " is not part of milestone " + ms.id +
                ": choose one of " + list + ", or all");
  }
  std::vector<fs::path> model_dirs = opt.model_dirs;
  model_dirs.push_back(root / "datasets" / "models");
  const std::string model_name = opt.model.value_or(ms.default_model);
  const fs::path model_path = find_model(model_name, model_dirs);
  const std::int64_t n = opt.images.value_or(ms.default_images);
#ifdef CONVLAB_HAVE_CUDA
  if (device == "gpu") {
    std::string why;
    if (!cuda_device_available(&why)) {
      throw CudaError("milestone " + ms.id + (ms.id == "m1" ? " --device gpu" : "") +
                      " needs a CUDA GPU: " + why +
                      ". Run it on the course's GPU machine" +
                      (ms.id == "m1" ? "; here, run m1 --device cpu or m2." : "; here, run m2."));
    }
  }
#endif

  out << "Loading fashion-mnist data..." << std::flush;
  const data::Dataset test = data::load_fashion_mnist(data::data_dir(opt.data), data::Split::test);
  out << " done\n";
  if (n < 1 || n > test.count) {
    throw Error("N must be between 1 and " + std::to_string(test.count) +
                " (the size of the test set), got " + std::to_string(n));
  }
  out << "Loading model..." << std::flush;
  const Model model = load_model(model_path);
  out << " done" << std::endl;

  const Tensor input = test.images(n, model.input_scale);
  const std::span<const std::uint8_t> labels(test.labels.data(), static_cast<std::size_t>(n));
  auto expected = ms.expected(model.name, n, device);
  if (!expected) {
    if (auto it = model.expected_correct.find(n); it != model.expected_correct.end()) {
      expected = it->second;
    }
  }

  // The GPU makes one untimed warm-up call first (module loading, first-touch costs).
  const TimingOptions cpu_timing{0, opt.runs};
  [[maybe_unused]] const TimingOptions gpu_timing{1, opt.runs};
  std::vector<RunRecord> records;
  json gpu_json = nullptr;
  std::optional<profile::Profile> profiled;  // what --profile recorded
  std::optional<double> peak_flops;          // the --variant all table's fp32 ceiling
  std::string peak_note;                     // how it was measured, or why it was not
  if (ms.id == "m1" && device == "cpu") {
    RunRecord& rec = records.emplace_back();
    rec.label = "reference";
    rec.code_file = "reference/conv/library_conv_cpu.cpp";
    rec.run = run_network_cpu(model, input, conv_forward_reference, cpu_timing);
  } else if (ms.id == "m2") {
    RunRecord& rec = records.emplace_back();
    rec.label = "cpu";
    rec.code_file = "student/m2/conv_cpu.cpp";
    rec.run = run_network_cpu(model, input, cpu_conv(opt.impl), cpu_timing);
  } else {
#ifdef CONVLAB_HAVE_CUDA
    // Started before the run's first CUDA call, so that the profile covers all of it.
    std::optional<profile::Profiler> profiler;
    if (profiling) {
      try {
        profiler.emplace();
      } catch (const Error&) {
        // Without a GPU CUPTI fails too, but "no GPU" is the message that helps.
        std::string why;
        if (!cuda_device_available(&why)) throw CudaError("--profile needs a GPU: " + why);
        throw;
      }
    }
    const GpuInfo info = gpu_info();
    gpu_json = {{"name", info.name},
                {"driver", info.driver},
                {"cuda_driver", info.cuda_driver},
                {"sm_count", info.sm_count},
                {"compute_capability", info.compute_capability}};
    if (ms.id == "m1") {
      RunRecord& rec = records.emplace_back();
      rec.label = "cudnn";
      rec.code_file = "reference/conv/cudnn_conv.cu";
      rec.run = run_network_gpu(model, input, conv_forward_cudnn, "cuDNN", gpu_timing);
    } else {
      const std::string choice = opt.variant.value_or(ms.default_variant);
      std::vector<const GpuVariant*> chosen;
      if (choice == "all") {
        // The baseline (the first GPU variant declared) comes first so every other variant
        // has a speedup to show.
        const GpuVariant* baseline = &gpu_variants().front();
        chosen.push_back(baseline);
        for (const std::string& v : ms.variants) {
          if (v != baseline->name) chosen.push_back(&find_gpu_variant(v));
        }
      } else {
        const GpuVariant& v = find_gpu_variant(choice);
        if (std::find(ms.variants.begin(), ms.variants.end(), v.name) == ms.variants.end()) {
          throw Error("variant " + choice + " belongs to milestone " + std::string(v.milestone) +
                      ", not " + ms.id);
        }
        chosen.push_back(&v);
      }
      const bool all = choice == "all";
      for (const GpuVariant* v : chosen) {
        RunRecord& rec = records.emplace_back();
        rec.label = std::string(v->name);
        rec.code_file = opt.impl == Impl::student ? std::string(v->student_file)
                                                  : solution_file(v->student_file);
        attempt(rec, all, [&] {
          const GpuConvTanhPoolFn fused = fuse ? v->fused_launcher(opt.impl) : nullptr;
          return run_network_gpu(model, input, v->launcher(opt.impl), fused, rec.label, gpu_timing);
        });
      }
      if (all) {
        RunRecord& rec = records.emplace_back();
        // Fused exactly when a variant was: then its row times cuDNN's conv, tanh and max-pool.
        const bool any_fused = std::any_of(records.begin(), records.end(), [](const auto& r) {
          return r.status == "ok" && !fused_layers(r.run).empty();
        });
        rec.label = "cudnn";
        rec.reference = true;
        rec.run =
            run_network_gpu(model, input, conv_forward_cudnn,
                            any_fused ? conv_tanh_maxpool_cudnn : nullptr, "cuDNN", gpu_timing);
      }
    }
    if (profiler) profiled = profiler->stop();
    // Measured after the profile stops, so that its SGEMM stays out of the table.
    if (records.size() > 1) {
      try {
        const Fp32Peak& peak = measured_fp32_peak();
        peak_flops = peak.flops_per_s;
        peak_note = peak.method;
        gpu_json["fp32_peak_flops"] = peak.flops_per_s;
        gpu_json["fp32_peak_method"] = peak.method;
      } catch (const Error& e) {
        peak_note = e.what();
      }
    }
#endif
  }

  for (RunRecord& rec : records) {
    if (rec.status != "ok") continue;
    rec.correct = count_correct(predictions(rec.run.output), labels);
    rec.expected = expected;
  }

  const bool table = records.size() > 1;
  if (!table) {
    const RunRecord& rec = records.front();
    out << "Op Time: " << format_seconds(rec.run.op_time()) << "\n";
    out << "Correctness: " << format_accuracy(static_cast<double>(rec.correct) / n)
        << " Model: " << model.name << std::endl;
    if (const std::string fused = fused_layers(rec.run); !fused.empty()) {
      out << "Op Time includes the fused tanh and max-pool: conv layer " << fused
          << " and the tanh and 2x2 max-pool after it ran as one call (--no-fuse times the "
             "convolution alone)."
          << std::endl;
    }
  } else {
    double baseline_time = 0.0;
    for (const RunRecord& rec : records) {
      if (rec.label == "baseline" && rec.status == "ok") baseline_time = rec.run.op_time();
    }
    const bool medians = opt.runs > 1;
    const auto ms_text = [](double seconds) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3f", seconds * 1e3);
      return std::string(buf);
    };
    std::vector<std::vector<std::string>> rows;
    for (const RunRecord& rec : records) {
      std::vector<std::string> row{rec.label + (rec.reference ? " (library)" : "")};
      if (rec.status != "ok") {
        row.insert(row.end(), medians ? 6 : 5, "-");
        row.push_back(rec.status == "not_implemented" ? "not implemented" : "error");
        rows.push_back(row);
        continue;
      }
      const double t = rec.run.op_time();
      double median = 0.0;
      for (const ConvLayerTime& l : rec.run.conv_layers) median += l.median();
      char speed[32], gflops[32], of_peak[32];
      std::snprintf(speed, sizeof speed, "%.2fx",
                    baseline_time > 0 && t > 0 ? baseline_time / t : 0.0);
      std::snprintf(gflops, sizeof gflops, "%.0f", t > 0 ? flops_of(rec.run) / t / 1e9 : 0.0);
      std::snprintf(of_peak, sizeof of_peak, "%.1f%%",
                    peak_flops && t > 0 ? 100.0 * flops_of(rec.run) / t / *peak_flops : 0.0);
      const bool ok = !rec.expected || rec.correct == *rec.expected;
      row.push_back(ms_text(t));
      if (medians) row.push_back(ms_text(median));
      row.push_back(baseline_time > 0 ? speed : "-");
      row.push_back(gflops);
      row.push_back(peak_flops ? of_peak : "-");
      row.push_back(format_accuracy(static_cast<double>(rec.correct) / n));
      row.push_back(rec.expected ? (ok ? "correct" : "WRONG") : "no expectation");
      rows.push_back(row);
    }
    out << "Model: " << model.name << ", " << n << " images, " << impl_name(opt.impl) << " code";
    if (!gpu_json.is_null()) out << ", " << gpu_json["name"].get<std::string>();
    if (medians) out << ", fastest and median of " << opt.runs << " timed runs";
    out << "\n\n";
    std::vector<std::string> header{"variant", "Op Time (ms)"};
    if (medians) header.push_back("median (ms)");
    header.insert(header.end(),
                  {"speedup vs baseline", "GFLOP/s", "% of fp32 peak", "correctness", "check"});
    std::vector<int> right{1, 2, 3, 4};
    if (medians) right.push_back(5);
    out << format_table(header, rows, right);
    if (peak_flops) {
      char peak[64];
      std::snprintf(peak, sizeof peak, "%.1f TFLOP/s", *peak_flops / 1e12);
      out << "fp32 peak: " << peak << " measured (" << peak_note << ")\n";
    } else if (!peak_note.empty()) {
      out << "fp32 peak: not measured (" << peak_note << ")\n";
    }
    std::string fused_rows, fused_at;
    for (const RunRecord& rec : records) {
      const std::string fused = rec.status == "ok" ? fused_layers(rec.run) : "";
      if (fused.empty()) continue;
      fused_rows += (fused_rows.empty() ? "" : ", ") + rec.label;
      fused_at = fused;
    }
    if (!fused_rows.empty()) {
      out << "Op Time of " << fused_rows << " includes the fused tanh and max-pool: conv layer "
          << fused_at
          << " and the tanh and 2x2 max-pool after it ran as one call (--no-fuse times the "
             "convolutions alone).\n";
    }
    for (const RunRecord& rec : records) {
      if (rec.status != "ok") err << rec.label << ": " << rec.error << "\n";
    }
  }

  int code = 0;
  for (const RunRecord& rec : records) {
    if (rec.status == "ok" && rec.expected && rec.correct != *rec.expected && !rec.reference) {
      code = kExitIncorrect;
      err << "convlab: " << rec.label << " got " << rec.correct << " of " << n
          << " images right; model " << model.name << " expects " << *rec.expected << " ("
          << format_accuracy(static_cast<double>(*rec.expected) / n) << "). The convolution in "
          << rec.code_file
          << " computes something else. Run `convlab check " << ms.id
          << (ms.variants.empty() ? std::string() : " --variant " + rec.label)
          << "` first: it names the wrong outputs by (b, m, h, w).\n";
    }
  }

  json profile_report = nullptr;
  if (profiled) {
    const profile::ProfileSummary summary = profile::summarize(*profiled);
    const std::string command = profiled_command(opt, ms.id, model.name, n);
    const long pid = static_cast<long>(::getpid());
    out << profile::format_summary(summary, pid, command) << std::flush;
    profile_report = profile::summary_json(summary, pid, command);
    if (opt.profile_json) {
      std::ofstream f(*opt.profile_json);
      if (!f) throw Error("cannot write the profile to " + opt.profile_json->string());
      f << profile_report.dump(2) << "\n";
    }
  }

  if (opt.json) {
    json runs = json::array();
    for (const RunRecord& rec : records) {
      json r = {{"variant", rec.label}, {"status", rec.status}, {"library", rec.reference}};
      if (rec.status != "ok") {
        r["error"] = rec.error;
      } else {
        json layers = json::array();
        for (const ConvLayerTime& t : rec.run.conv_layers) {
          layers.push_back({{"layer", t.layer},
                            {"shape", shape_json(t.shape)},
                            {"seconds", t.seconds},
                            {"median_seconds", t.median()},
                            {"samples", t.samples},
                            {"flops", t.shape.flops()},
                            {"fused", t.fused.empty() ? json(nullptr) : json(t.fused)}});
        }
        r["op_time_s"] = rec.run.op_time();
        r["gflops"] = rec.run.op_time() > 0 ? flops_of(rec.run) / rec.run.op_time() / 1e9 : 0.0;
        if (peak_flops) {
          r["percent_of_fp32_peak"] =
              rec.run.op_time() > 0 ? 100.0 * flops_of(rec.run) / rec.run.op_time() / *peak_flops
                                    : 0.0;
        }
        r["correct"] = rec.correct;
        r["accuracy"] = static_cast<double>(rec.correct) / n;
        r["expected_correct"] = rec.expected ? json(*rec.expected) : json(nullptr);
        r["matches_expected"] = !rec.expected || rec.correct == *rec.expected;
        r["conv_layers"] = layers;
      }
      runs.push_back(r);
    }
    const json report = {
        {"convlab_version", CONVLAB_VERSION},
        {"milestone", ms.id},
        {"model", model.name},
        {"model_file", model_path.string()},
        {"images", n},
        {"timed_runs", opt.runs},
        {"impl", impl_name(opt.impl)},
        {"device", device},
        {"gpu", gpu_json},
        {"runs", runs},
        {"profile", profile_report},
        {"wall_time_s",
         std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count()}};
    std::ofstream f(*opt.json);
    if (!f) throw Error("cannot write the JSON report to " + opt.json->string());
    f << report.dump(2) << "\n";
  }
  return code;
}

int run_milestone(const RunOptions& opt, std::ostream& out, std::ostream& err) {
  return run_milestone_fusing(opt, /*fuse=*/true, out, err);
}

}  // namespace convlab

#include <CLI/CLI.hpp>

#include "reference/driver/cli_values.hpp"
#include "reference/driver/commands.hpp"

namespace convlab {

void add_run_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<RunOptions>();
  auto impl = std::make_shared<std::string>(CONVLAB_DEFAULT_IMPL);
  auto model_dirs = std::make_shared<std::vector<std::string>>();
  auto no_fuse = std::make_shared<bool>(false);
  CLI::App* run = app.add_subcommand(
      "run", "Run a milestone's convolution inside the network on the Fashion-MNIST test set");
  run->add_option("milestone", opt->milestone, "m1, m2, m3 or final")->required();
  run->add_option("model", opt->model,
                  "model name or .safetensors file (default: the milestone's)");
  run->add_option("N", opt->images, "how many test images, 1 to 10000 (default 10000)");
  run->add_option("--variant", opt->variant,
                  "GPU variant to run (" + variants_by_milestone_help() + "), or all for a table")
      ->check(CLI::IsMember(variant_choices()));
  // Only where the staff solutions are built in: the student release has no such choice.
  if (solutions_available()) {
    run->add_option("--impl", *impl, "student: your code in student/; solution: the staff code")
        ->check(CLI::IsMember({"student", "solution"}))
        ->capture_default_str();
  }
  run->add_option("--json", opt->json, "also write the results as JSON to this file");
  run->add_option("--data", opt->data,
                  "Fashion-MNIST directory (default: $CONVLAB_DATA, else "
                  "/usr/share/datasets/fashion-mnist)");
  run->add_option("--device", opt->device, "m1 only: cpu (m1.1) or gpu (m1.2)")
      ->check(CLI::IsMember({"cpu", "gpu"}));
  run->add_option("--models", *model_dirs, "extra directory of .safetensors models");
  run->add_option("--runs", opt->runs, "timed calls of each conv layer; Op Time is the fastest")
      ->capture_default_str();
  run->add_flag("--profile", opt->profile,
                "GPU runs: after the results, print every kernel, memory copy and CUDA call with "
                "its time (the nvprof summary table)");
  run->add_option("--profile-json", opt->profile_json,
                  "also write the profile as JSON to this file (implies --profile)");
  run->add_flag("--no-fuse", *no_fuse,
                "time every conv layer alone, even where the variant also has a fused conv + tanh "
                "+ max-pool launcher");
  run->callback([opt, impl, model_dirs, no_fuse, &exit_code] {
    opt->impl = parse_impl(*impl);
    for (const std::string& d : *model_dirs) opt->model_dirs.emplace_back(d);
    exit_code = run_milestone_fusing(*opt, !*no_fuse, std::cout, std::cerr);
  });
}

}  // namespace convlab
