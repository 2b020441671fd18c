#include "reference/conv/variant_table.hpp"

#include <array>

#include "reference/core/error.hpp"

namespace convlab {

namespace {

// Every line of variants.def, as data.
#define CONVLAB_VARIANT(id, milestone, device, student_file, staff_file, handout, idea, precision, \
                        libraries, interface, sweep, fused)                                        \
  Variant{#id,                                                                                     \
          #milestone,                                                                              \
          Device::device,                                                                          \
          student_file,                                                                            \
          staff_file,                                                                              \
          handout,                                                                                 \
          idea,                                                                                    \
          Precision::precision,                                                                    \
          Library::libraries,                                                                      \
          Interface::interface,                                                                    \
          std::string_view(#sweep) == "sweep",                                                     \
          std::string_view(#fused) == "fused"},
constexpr std::array kDeclared = {
#include "reference/conv/variants.def"
};
#undef CONVLAB_VARIANT

// The folder named after variant `id` beside `file`: "student/final/5_best.cu" gives
// "student/final/best/".
std::string folder_beside(std::string_view file, std::string_view id) {
  const std::size_t slash = file.rfind('/');
  const std::string_view parent = slash == std::string_view::npos ? "" : file.substr(0, slash + 1);
  return std::string(parent) + std::string(id) + "/";
}

std::string valid_ids() {
  std::string names;
  for (const Variant& v : kDeclared) names += (names.empty() ? "" : ", ") + std::string(v.id);
  return names;
}

}  // namespace

std::string_view device_name(Device d) {
  return d == Device::gpu ? "gpu" : "cpu";
}

std::string_view library_name(Library l) {
  return l == Library::cublas ? "cublas" : "none";
}

std::string_view interface_name(Interface i) {
  switch (i) {
    case Interface::workspace:
      return "workspace";
    case Interface::host:
      return "host";
    case Interface::plain:
      break;
  }
  return "plain";
}

std::string Variant::entry_point() const {
  return (gpu() ? "conv_" : "conv_forward_") + std::string(id);
}

std::string Variant::student_folder() const {
  return folder_beside(student_file, id);
}

std::string Variant::staff_folder() const {
  return folder_beside(staff_file, id);
}

bool Variant::in_student_folder(std::string_view file) const {
  const std::string folder = student_folder();
  if (!file.starts_with(folder)) return false;
  const std::string_view name = file.substr(folder.size());
  if (name.find('/') != std::string_view::npos) return false;
  const std::array<std::string_view, 2> endings =
      gpu() ? std::array<std::string_view, 2>{".cu", ".cuh"}
            : std::array<std::string_view, 2>{".cpp", ".hpp"};
  for (const std::string_view ending : endings) {
    if (name.size() > ending.size() && name.ends_with(ending)) return true;
  }
  return false;
}

std::span<const Variant> variants() {
  return kDeclared;
}

const Variant& find_variant(std::string_view id) {
  for (const Variant& v : kDeclared) {
    if (v.id == id) return v;
  }
  throw Error("unknown variant '" + std::string(id) + "': choose one of " + valid_ids());
}

const Variant* variant_of_student_file(std::string_view student_file) {
  for (const Variant& v : kDeclared) {
    if (v.student_file == student_file || v.in_student_folder(student_file)) return &v;
  }
  return nullptr;
}

std::vector<std::string> variant_ids(std::string_view milestone, std::string_view device) {
  std::vector<std::string> ids;
  for (const Variant& v : kDeclared) {
    if ((milestone.empty() || v.milestone == milestone) &&
        (device.empty() || device_name(v.device) == device)) {
      ids.emplace_back(v.id);
    }
  }
  return ids;
}

}  // namespace convlab
