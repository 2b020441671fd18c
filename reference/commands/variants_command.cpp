// `convlab variants [--json]`: the variant declarations (reference/conv/variants.def) as a
// table, or as JSON for scripts (tools/gpu-check.sh, the tests).
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "reference/commands/commands.hpp"
#include "reference/conv/variants.hpp"
#include "reference/core/format.hpp"

namespace convlab {

nlohmann::json variants_json() {
  nlohmann::json list = nlohmann::json::array();
  for (const Variant& v : variants()) {
    list.push_back({{"id", v.id},
                    {"milestone", v.milestone},
                    {"device", device_name(v.device)},
                    {"student_file", v.student_file},
                    {"staff_file", v.staff_file},
                    {"handout", v.handout},
                    {"idea", v.idea},
                    {"precision", precision_name(v.precision)},
                    {"libraries", v.libraries == Library::none
                                      ? nlohmann::json::array()
                                      : nlohmann::json::array({library_name(v.libraries)})},
                    {"interface", interface_name(v.interface)},
                    {"sweep", v.sweep},
                    {"fused", v.fused},
                    {"entry_point", v.entry_point()}});
  }
  return list;
}

std::string variants_text() {
  std::vector<std::vector<std::string>> rows;
  for (const Variant& v : variants()) {
    rows.push_back({std::string(v.id), std::string(v.milestone), std::string(device_name(v.device)),
                    std::string(precision_name(v.precision)),
                    std::string(library_name(v.libraries)),
                    std::string(interface_name(v.interface)), v.fused ? "yes" : "no",
                    std::string(v.student_file), std::string(v.idea)});
  }
  return format_table({"variant", "milestone", "device", "precision", "libraries", "interface",
                       "fused", "file", "idea"},
                      rows);
}

void add_variants_command(CLI::App& app, int& exit_code) {
  auto as_json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "variants", "List the convolution variants: milestone, device, file to edit, idea");
  cmd->add_flag("--json", *as_json, "print a JSON list (one object per variant) instead of a table");
  cmd->callback([as_json, &exit_code] {
    if (*as_json) {
      std::cout << variants_json().dump(2) << "\n";
    } else {
      std::cout << variants_text();
    }
    exit_code = 0;
  });
}

}  // namespace convlab
