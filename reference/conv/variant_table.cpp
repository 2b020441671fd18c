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
    if (v.student_file == student_file) return &v;
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
