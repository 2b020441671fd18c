/// @file
/// @brief The variant declarations (variants.def) as data: what each variant is, where it is
/// written, what it may use. No entry point is linked: the grader and the tools read it too.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reference/conv/precision.hpp"

namespace convlab {

/// Where a variant runs.
enum class Device { cpu, gpu };
/// The one library a variant may call.
enum class Library { none, cublas };
/// How its launcher is called: plain; with device scratch memory of the size it states
/// (workspace); with host memory, doing the layer's copies itself (host).
enum class Interface { plain, workspace, host };

/// "cpu" or "gpu", as variants.def writes it.
std::string_view device_name(Device d);
/// "none" or "cublas", as variants.def writes it.
std::string_view library_name(Library l);
/// "plain", "workspace" or "host", as variants.def writes it.
std::string_view interface_name(Interface i);

/// One line of variants.def: what a variant is, where it is written and what it may use. The
/// same in every build (CPU-only included).
struct Variant {
  std::string_view id;                    ///< the name --variant takes
  std::string_view milestone;             ///< the milestone whose handout asks for it, e.g. "final"
  Device device = Device::cpu;            ///< where it runs
  std::string_view student_file;          ///< the file the team edits
  std::string_view staff_file;            ///< the staff solution (absent from the student release)
  std::string_view handout;               ///< the handout section that explains it
  std::string_view idea;                  ///< one line: what this variant changes
  Precision precision = Precision::fp32;  ///< its class: fp32, tf32 or fp16
  Library libraries = Library::none;      ///< the one library it may call
  Interface interface = Interface::plain;  ///< how its launcher is called
  bool sweep = false;  ///< whether it offers its parameter grid (conv_<id>_sweep)
  bool fused = false;  ///< whether it offers a fused conv + tanh + max-pool launcher

  /// Whether it runs on the GPU.
  bool gpu() const { return device == Device::gpu; }
  /// Whether it states a workspace size and its launcher takes the framework's buffer.
  bool workspace() const { return interface == Interface::workspace; }
  /// Whether its launcher takes host memory (its Op Time is then its Layer Time).
  bool host() const { return interface == Interface::host; }
  /// The entry point's name: conv_forward_<id> (CPU) or conv_<id> (GPU).
  std::string entry_point() const;
  /// The variant's folder beside its student file, named after it ("student/final/best/" for
  /// best): a team may add files of its own there, compiled and graded with the student file
  /// (student/CMakeLists.txt; milestones/final/README.md, section '5. Your best kernel').
  std::string student_folder() const;
  /// The same folder beside the staff file ("reference/solutions/final/best/" for best).
  std::string staff_folder() const;
  /// Whether `file`, a path from the root, is one a team may add in student_folder(): a source
  /// or header of the variant's device (.cu and .cuh on the GPU, .cpp and .hpp on the CPU)
  /// directly inside it.
  bool in_student_folder(std::string_view file) const;
};

/// Every declared variant, in declaration (teaching) order.
std::span<const Variant> variants();
/// The variant `id`; throws Error listing the valid ids otherwise.
const Variant& find_variant(std::string_view id);
/// The variant whose student file is `student_file` (e.g. "student/m2/conv_cpu.cpp") or whose
/// student folder takes it (e.g. "student/final/best/tiles.cu"), or nullptr.
const Variant* variant_of_student_file(std::string_view student_file);
/// The ids of the variants of `milestone` (all milestones when empty) and `device` (both when
/// empty), in declaration order.
std::vector<std::string> variant_ids(std::string_view milestone = {}, std::string_view device = {});

}  // namespace convlab
