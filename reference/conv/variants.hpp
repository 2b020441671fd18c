/// @file
/// @brief The variant registry (variants.def): every variant's declaration, and which code runs
/// (the team's or the staff solution).
#pragma once

#include <span>
#include <string_view>

#include "reference/conv/student_api.hpp"
#ifdef CONVLAB_HAVE_CUDA
#include "reference/conv/gpu_launcher.hpp"
#endif
#include "reference/conv/variant_table.hpp"

namespace convlab {

/// Which code a run uses: the team's files in student/ or the staff solutions.
enum class Impl { student, solution };

/// "student" or "solution"
std::string_view impl_name(Impl impl);
/// Parses "student" or "solution"; throws Error otherwise.
Impl parse_impl(std::string_view text);
/// Whether the staff solutions were compiled into this build.
bool solutions_available();

/// The CPU convolution of `impl` for the CPU variant `id` (the first CPU variant when empty);
/// throws Error if the staff solution is not in this build.
CpuConvFn cpu_conv(Impl impl, std::string_view id = {});

#ifdef CONVLAB_HAVE_CUDA
/// One GPU variant: its name, where the team writes it, and both implementations.
struct GpuVariant {
  std::string_view name;          ///< registry id (Variant::id)
  std::string_view milestone;     ///< "m3" or "final"
  std::string_view student_file;  ///< the file the team edits
  std::string_view handout;       ///< the handout section that explains it
  std::string_view idea;          ///< one line: what this variant changes
  GpuLauncher student;            ///< the team's launcher
  GpuLauncher solution;           ///< the staff launcher, or empty in the student release
  /// The team's fused conv + tanh + max-pool launcher, or nullptr where the variant offers
  /// none (variants.def, `unfused`).
  GpuConvTanhPoolFn student_fused = nullptr;
  /// The staff fused launcher, or nullptr (no fused launcher, or the student release).
  GpuConvTanhPoolFn solution_fused = nullptr;
  /// The team's parameter grid, or nullptr where the variant declares none (`nosweep`).
  GpuSweepFn student_sweep = nullptr;
  /// The staff grid, or nullptr (no grid, or the student release).
  GpuSweepFn solution_sweep = nullptr;

  /// The launcher for `impl`; throws Error if the staff solution is not in this build.
  GpuLauncher launcher(Impl impl) const;
  /// The fused launcher for `impl`, or nullptr when the variant offers none. Throws Error if
  /// the variant offers one but the staff solutions are not in this build.
  GpuConvTanhPoolFn fused_launcher(Impl impl) const;
  /// The parameter grid for `impl`, or nullptr when the variant declares none. Throws Error if
  /// it declares one but the staff solutions are not in this build.
  GpuSweepFn sweep(Impl impl) const;
};

/// Every GPU variant, in teaching order.
std::span<const GpuVariant> gpu_variants();
/// The variant called `name`; throws Error listing the valid names otherwise.
const GpuVariant& find_gpu_variant(std::string_view name);
#endif

}  // namespace convlab
