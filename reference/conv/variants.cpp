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

CpuConvFn cpu_conv(Impl impl) {
  if (impl == Impl::student) return &student::conv_forward_cpu;
#ifdef CONVLAB_HAVE_SOLUTIONS
  return &solution::conv_forward_cpu;
#else
  throw Error("the staff solutions are not part of this build; run with --impl student");
#endif
}

#ifdef CONVLAB_HAVE_CUDA
#ifdef CONVLAB_HAVE_SOLUTIONS
#define CONVLAB_SOLUTION(id) &solution::conv_##id
#else
#define CONVLAB_SOLUTION(id) nullptr
#endif

namespace {
// The fused launchers of the variants gpu_variants.def lists with CONVLAB_GPU_FUSED_VARIANT.
#ifdef CONVLAB_HAVE_SOLUTIONS
#define CONVLAB_SOLUTION_FUSED(id) &solution::conv_tanh_maxpool_##id
#else
#define CONVLAB_SOLUTION_FUSED(id) nullptr
#endif
struct FusedPair {
  GpuConvTanhPoolFn student = nullptr;
  GpuConvTanhPoolFn solution = nullptr;
};
constexpr FusedPair fused_of([[maybe_unused]] std::string_view name) {
#define CONVLAB_GPU_FUSED_VARIANT(id) \
  if (name == #id) return FusedPair{&student::conv_tanh_maxpool_##id, CONVLAB_SOLUTION_FUSED(id)};
#include "reference/conv/gpu_variants.def"
#undef CONVLAB_GPU_FUSED_VARIANT
  return {};
}

#define CONVLAB_GPU_VARIANT(id, milestone, file, handout, idea) \
  GpuVariant{#id,                                               \
             milestone,                                         \
             file,                                              \
             handout,                                           \
             idea,                                              \
             &student::conv_##id,                               \
             CONVLAB_SOLUTION(id),                              \
             fused_of(#id).student,                             \
             fused_of(#id).solution},
constexpr std::array kVariants = {
#include "reference/conv/gpu_variants.def"
};
#undef CONVLAB_GPU_VARIANT
}  // namespace

GpuConvFn GpuVariant::launcher(Impl impl) const {
  if (impl == Impl::student) return student;
  if (solution == nullptr) {
    throw Error("the staff solutions are not part of this build; run with --impl student");
  }
  return solution;
}

GpuConvTanhPoolFn GpuVariant::fused_launcher(Impl impl) const {
  if (impl == Impl::student || student_fused == nullptr) return student_fused;
  if (solution_fused == nullptr) {
    throw Error("the staff solutions are not part of this build; run with --impl student");
  }
  return solution_fused;
}

std::span<const GpuVariant> gpu_variants() {
  return kVariants;
}

const GpuVariant& find_gpu_variant(std::string_view name) {
  std::string names;
  for (const GpuVariant& v : kVariants) {
    if (v.name == name) return v;
    names += names.empty() ? "" : ", ";
    names += v.name;
  }
  throw Error("unknown variant '" + std::string(name) + "': choose one of " + names + ", or all");
}
#endif

}  // namespace convlab
