#include "spec/env_export.h"

#include "core/reserved_env.h"

namespace gpusched::spec {
namespace {

bool IsEnvName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    const bool word = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                      (c >= '0' && c <= '9') || c == '_';
    if (!word) return false;
  }
  return true;
}

Status AddItem(const std::string& item, const std::string& field, EnvExport& out) {
  if (item == "ALL") {
    out.all = true;
    return Status::Ok();
  }
  const size_t eq = item.find('=');
  const std::string name = item.substr(0, eq);
  if (!IsEnvName(name)) {
    return InvalidArgument(field + ": \"" + item +
                           "\" is not ALL, NONE, VAR or VAR=VALUE (a variable name is "
                           "letters, digits and _, not starting with a digit)");
  }
  if (core::IsReservedEnvName(name)) {
    return InvalidArgument(field + ": " + name + " is reserved for gpusched (every " +
                           std::string(core::kReservedEnvPrefix) +
                           "* name is the product's own, and never travels with a task)");
  }
  if (eq == std::string::npos) {
    out.names.push_back(name);
  } else {
    out.values[name] = item.substr(eq + 1);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<EnvExport> ParseEnvExportItems(const std::vector<std::string>& items,
                                        std::string_view field_view) {
  const std::string field(field_view);
  if (items.empty()) {
    return InvalidArgument(field + ": empty; use ALL, NONE or VAR[,VAR...]");
  }
  EnvExport out;
  for (const std::string& item : items) {
    if (item.empty()) {
      return InvalidArgument(field + ": an empty item; use ALL, NONE or VAR[,VAR...]");
    }
    if (item == "NONE") {
      if (items.size() > 1) return InvalidArgument(field + ": NONE takes no other item");
      return out;
    }
    GS_RETURN_IF_ERROR(AddItem(item, field, out));
  }
  return out;
}

StatusOr<EnvExport> ParseEnvExport(std::string_view text, std::string_view field) {
  std::vector<std::string> items;
  if (!text.empty()) {
    size_t start = 0;
    for (;;) {
      const size_t comma = text.find(',', start);
      items.emplace_back(text.substr(start, comma - start));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  }
  return ParseEnvExportItems(items, field);
}

std::map<std::string, std::string> ExportedEnv(
    const EnvExport& rule, const std::map<std::string, std::string>& environment) {
  std::map<std::string, std::string> out;
  if (rule.all) {
    for (const auto& [name, value] : environment) {
      if (!core::IsReservedEnvName(name)) out[name] = value;
    }
  }
  for (const std::string& name : rule.names) {
    auto it = environment.find(name);
    if (it != environment.end()) out[name] = it->second;
  }
  for (const auto& [name, value] : rule.values) out[name] = value;
  return out;
}

}  // namespace gpusched::spec
