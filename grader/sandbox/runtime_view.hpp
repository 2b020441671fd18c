/// @file
/// @brief What a program needs to see to run, and nothing more: the files of its dynamic
/// linking closure and the device nodes of one GPU. The team's process gets exactly these (a
/// SandboxSpec with system_folders off), so no framework tree, grader binary, staff object,
/// toolkit library or other team is there to be read or loaded at run time.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace convlab::grader {

/// The shared objects an ELF file asks for (DT_NEEDED), its search paths (DT_RPATH,
/// DT_RUNPATH, $ORIGIN expanded) and its interpreter (PT_INTERP). Throws Error for a file that
/// is not a 64-bit little-endian ELF or whose dynamic section is malformed.
struct ElfDependencies {
  std::vector<std::string> needed;
  std::vector<std::filesystem::path> rpath, runpath;
  std::optional<std::filesystem::path> interpreter;
};
ElfDependencies read_elf_dependencies(const std::filesystem::path& file);

/// Resolves a soname as the dynamic loader would for `from`: DT_RPATH (without DT_RUNPATH),
/// `ld_library_path`, DT_RUNPATH, the loader's cache (`cache`: soname -> path), the default
/// folders. nullopt when no folder has it.
std::optional<std::filesystem::path> resolve_library(
    const std::string& soname, const ElfDependencies& from, const std::string& ld_library_path,
    const std::map<std::string, std::filesystem::path>& cache);

/// soname -> path of every x86-64 (or this machine's) library the loader's cache lists
/// (`ldconfig -p`); empty when ldconfig cannot be run.
std::map<std::string, std::filesystem::path> loader_cache();

/// Every file `programs` load at start-up, recursively, plus `dlopened` sonames (and theirs)
/// where they exist: the interpreter, each library as named and its real file (not the
/// programs themselves). Throws Error
/// for a library a program needs that cannot be found (the run could not start).
std::vector<std::filesystem::path> linking_closure(
    const std::vector<std::filesystem::path>& programs, const std::vector<std::string>& dlopened,
    const std::string& ld_library_path);

/// The sonames the CUDA runtime opens while it runs (the driver and its JIT compiler).
extern const std::vector<std::string> kCudaDriverLibraries;

/// One GPU for a run: its device nodes and the CUDA_VISIBLE_DEVICES value that names it.
struct GpuAssignment {
  std::vector<std::filesystem::path> nodes;  ///< /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidiaN...
  std::string visible_devices;               ///< its UUID where known, else as given
};

/// The first GPU that `cuda_visible_devices` names (all GPUs when empty), in PCI bus order
/// (the grader sets CUDA_DEVICE_ORDER=PCI_BUS_ID so that indices mean the same to it, the
/// referee and nvidia-smi) among those this process may open, from the driver's
/// /proc/driver/nvidia/gpus. Where the driver does
/// not list its GPUs there, every /dev/nvidiaN node and the variable as given.
GpuAssignment assign_gpu(const std::string& cuda_visible_devices,
                         const std::filesystem::path& proc_gpus = "/proc/driver/nvidia/gpus",
                         const std::filesystem::path& dev = "/dev");

/// The character devices every run may open: /dev/null, /dev/zero, /dev/full, /dev/random,
/// /dev/urandom.
extern const std::vector<std::filesystem::path> kPlainDevices;

}  // namespace convlab::grader
