// What the team's process is shown: a program's linking closure, and one GPU's device nodes.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "grader/sandbox/runtime_view.hpp"
#include "reference/core/error.hpp"
#include "tests/support/test_support.hpp"

namespace test_runtime_view {

namespace fs = std::filesystem;
using namespace convlab::grader;

namespace {

bool holds(const std::vector<fs::path>& files, const std::string& name) {
  return std::any_of(files.begin(), files.end(),
                     [&](const fs::path& f) { return f.filename().string().rfind(name, 0) == 0; });
}

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

}  // namespace

TEST_CASE("a program's linking closure: its libraries and loader, not the program") {
  const fs::path probe = SANDBOX_PROBE;
  const ElfDependencies deps = read_elf_dependencies(probe);
  REQUIRE(deps.interpreter.has_value());
  CHECK(std::find(deps.needed.begin(), deps.needed.end(), "libc.so.6") != deps.needed.end());

  const std::vector<fs::path> files = linking_closure({probe}, {}, "");
  CHECK(holds(files, "libc.so.6"));
  CHECK(holds(files, deps.interpreter->filename().string()));
  CHECK(std::find(files.begin(), files.end(), probe) == files.end());
  CHECK(std::find(files.begin(), files.end(), fs::canonical(probe)) == files.end());
  // Only libraries: nothing of the build tree the program came from.
  for (const fs::path& f : files) {
    CAPTURE(f);
    CHECK(f.string().find(probe.parent_path().string()) == std::string::npos);
  }
}

TEST_CASE("a file that is not a 64-bit ELF object, or a missing library, is an error") {
  convlab::test::TempDir dir;
  write(dir.path() / "script", "#!/bin/sh\necho hi\n");
  CHECK_THROWS_AS(read_elf_dependencies(dir.path() / "script"), convlab::Error);
  CHECK_THROWS_AS(linking_closure({dir.path() / "script"}, {}, ""), convlab::Error);
  CHECK_THROWS_AS(read_elf_dependencies(dir.path() / "missing"), convlab::Error);
  // A library name no folder holds is simply not there for dlopen.
  CHECK_FALSE(resolve_library("libconvlab-no-such-library.so.7", {}, "", {}).has_value());
}

TEST_CASE("one GPU: by index in PCI bus order, by UUID, or every node when unknown") {
  convlab::test::TempDir dir;
  const fs::path proc = dir.path() / "gpus", dev = dir.path() / "dev";
  write(proc / "0000:1a:00.0" / "information",
        "Model: X\nDevice Minor: \t 1\nGPU UUID: \t GPU-aaa1\n");
  write(proc / "0000:05:00.0" / "information",
        "Model: X\nDevice Minor: \t 3\nGPU UUID: \t GPU-bbb2\n");
  write(proc / "0000:33:00.0" / "information",
        "Model: X\nDevice Minor: \t 0\nGPU UUID: \t GPU-ccc3\n");
  for (const char* node : {"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"}) write(dev / node, "");
  // nvidia3 (GPU-bbb2) has no node this process can open: it does not count.

  const GpuAssignment first = assign_gpu("", proc, dev);
  CHECK(first.visible_devices == "GPU-aaa1");
  CHECK(first.nodes ==
        std::vector<fs::path>{dev / "nvidiactl", dev / "nvidia-uvm", dev / "nvidia1"});
  CHECK(assign_gpu("1", proc, dev).visible_devices == "GPU-ccc3");
  CHECK(assign_gpu("1,0", proc, dev).nodes.back() == dev / "nvidia0");
  CHECK(assign_gpu("GPU-ccc", proc, dev).visible_devices == "GPU-ccc3");

  // Names the driver's list cannot place: every GPU node, and the variable as given.
  for (const char* unknown : {"MIG-1234", "7", "GPU-bbb2"}) {
    CAPTURE(unknown);
    const GpuAssignment a = assign_gpu(unknown, proc, dev);
    CHECK(a.visible_devices == unknown);
    CHECK(std::count(a.nodes.begin(), a.nodes.end(), dev / "nvidia0") == 1);
    CHECK(std::count(a.nodes.begin(), a.nodes.end(), dev / "nvidia1") == 1);
  }
}

}  // namespace test_runtime_view
