#include "reference/conv/variants.hpp"

#include <array>
#include <string>

#include "reference/core/error.hpp"

namespace convlab {

std::string_view impl_name(Impl impl) {
  return impl == Impl::student ? "student" : "solution";
}

Impl parse_impl(std::string_view text) {
  if (text == "student") return Impl::student;
  if (text == "solution") return Impl::solution;
  throw Error("unknown implementation '" + std::string(text) + "': use student or solution");
}

bool solutions_available() {
#ifdef CONVLAB_HAVE_SOLUTIONS
  return true;
#else
  return false;
#endif
}

namespace {

constexpr std::string_view kNoSolutions =
    "the staff solutions are not part of this build; run with --impl student";

// The CPU variants' entry points.
struct CpuEntry {
  std::string_view id;
  CpuConvFn student;
  CpuConvFn solution;
};
#ifdef CONVLAB_HAVE_SOLUTIONS
#define CONVLAB_SOLUTION_CPU(id) &solution::conv_forward_##id
#else
#define CONVLAB_SOLUTION_CPU(id) nullptr
#endif
#define CONVLAB_CPU_ENTRY_cpu(id) CpuEntry{#id, &student::conv_forward_##id, CONVLAB_SOLUTION_CPU(id)},
#define CONVLAB_CPU_ENTRY_gpu(id)
#define CONVLAB_VARIANT(id, milestone, device, student_file, staff_file, handout, idea, \
                        precision, libraries, interface, sweep, fused)                   \
  CONVLAB_CPU_ENTRY_##device(id)
constexpr std::array kCpuEntries = {
#include "reference/conv/variants.def"
};
#undef CONVLAB_VARIANT

}  // namespace

CpuConvFn cpu_conv(Impl impl, std::string_view id) {
  for (const CpuEntry& e : kCpuEntries) {
    if (!id.empty() && e.id != id) continue;
    if (impl == Impl::student) return e.student;
    if (e.solution == nullptr) throw Error(std::string(kNoSolutions));
    return e.solution;
  }
  throw Error("no CPU variant '" + std::string(id) + "' is declared; see convlab variants");
}

#ifdef CONVLAB_HAVE_CUDA
namespace {
#ifdef CONVLAB_HAVE_SOLUTIONS
#define CONVLAB_SOLUTION_SWEEP_sweep(id) &solution::conv_##id##_sweep
#define CONVLAB_SOLUTION_plain(id) GpuLauncher(&solution::conv_##id)
#define CONVLAB_SOLUTION_workspace(id) \
  GpuLauncher(&solution::conv_##id, &solution::conv_##id##_workspace)
#define CONVLAB_SOLUTION_host(id) GpuLauncher::on_host(&solution::conv_##id)
#define CONVLAB_SOLUTION_FUSED_fused(id) &solution::conv_tanh_maxpool_##id
#else
#define CONVLAB_SOLUTION_SWEEP_sweep(id) nullptr
#define CONVLAB_SOLUTION_plain(id) GpuLauncher()
#define CONVLAB_SOLUTION_workspace(id) GpuLauncher()
#define CONVLAB_SOLUTION_host(id) GpuLauncher()
#define CONVLAB_SOLUTION_FUSED_fused(id) nullptr
#endif
#define CONVLAB_STUDENT_SWEEP_sweep(id) &student::conv_##id##_sweep
#define CONVLAB_STUDENT_SWEEP_nosweep(id) nullptr
#define CONVLAB_SOLUTION_SWEEP_nosweep(id) nullptr
#define CONVLAB_STUDENT_plain(id) GpuLauncher(&student::conv_##id)
#define CONVLAB_STUDENT_workspace(id) \
  GpuLauncher(&student::conv_##id, &student::conv_##id##_workspace)
#define CONVLAB_STUDENT_host(id) GpuLauncher::on_host(&student::conv_##id)
#define CONVLAB_STUDENT_FUSED_fused(id) &student::conv_tanh_maxpool_##id
#define CONVLAB_STUDENT_FUSED_unfused(id) nullptr
#define CONVLAB_SOLUTION_FUSED_unfused(id) nullptr
#define CONVLAB_GPU_ROW_cpu(id, milestone, file, handout, idea, interface, sweep, fused)
#define CONVLAB_GPU_ROW_gpu(id, milestone, file, handout, idea, interface, sweep, fused) \
  GpuVariant{#id,                                                            \
             #milestone,                                                     \
             file,                                                           \
             handout,                                                        \
             idea,                                                           \
             CONVLAB_STUDENT_##interface(id),                                \
             CONVLAB_SOLUTION_##interface(id),                               \
             CONVLAB_STUDENT_FUSED_##fused(id),                              \
             CONVLAB_SOLUTION_FUSED_##fused(id),                             \
             CONVLAB_STUDENT_SWEEP_##sweep(id),                              \
             CONVLAB_SOLUTION_SWEEP_##sweep(id)},
#define CONVLAB_VARIANT(id, milestone, device, student_file, staff_file, handout, idea, \
                        precision, libraries, interface, sweep, fused)                   \
  CONVLAB_GPU_ROW_##device(id, milestone, student_file, handout, idea, interface, sweep, fused)
constexpr std::array kGpuVariants = {
#include "reference/conv/variants.def"
};
#undef CONVLAB_VARIANT
}  // namespace

GpuLauncher GpuVariant::launcher(Impl impl) const {
  if (impl == Impl::student) return student;
  if (!solution) throw Error(std::string(kNoSolutions));
  return solution;
}

GpuConvTanhPoolFn GpuVariant::fused_launcher(Impl impl) const {
  if (impl == Impl::student || student_fused == nullptr) return student_fused;
  if (solution_fused == nullptr) throw Error(std::string(kNoSolutions));
  return solution_fused;
}

GpuSweepFn GpuVariant::sweep(Impl impl) const {
  if (impl == Impl::student || student_sweep == nullptr) return student_sweep;
  if (solution_sweep == nullptr) throw Error(std::string(kNoSolutions));
  return solution_sweep;
}

std::span<const GpuVariant> gpu_variants() {
  return kGpuVariants;
}

const GpuVariant& find_gpu_variant(std::string_view name) {
  std::string names;
  for (const GpuVariant& v : kGpuVariants) {
    if (v.name == name) return v;
    names += names.empty() ? "" : ", ";
    names += v.name;
  }
  throw Error("unknown variant '" + std::string(name) + "': choose one of " + names + ", or all");
}
#endif

}  // namespace convlab
