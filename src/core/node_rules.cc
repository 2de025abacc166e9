#include "core/node_rules.h"

#include <cctype>

namespace gpusched::core {
namespace {

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// A label name or a non-empty value: 1-63 of [A-Za-z0-9._-], alphanumeric at both ends.
bool IsLabelName(std::string_view s) {
  if (s.empty() || s.size() > 63 || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// A key prefix: a DNS subdomain (lower-case letters, digits, '-' and '.').
bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253 || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    const bool lower_alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!lower_alnum && c != '-' && c != '.') return false;
  }
  return true;
}

Status Bad(std::string_view field, std::string_view text, const std::string& why) {
  return InvalidArgument(std::string(field) + ": \"" + std::string(text) + "\": " + why);
}

std::string UnknownEffect(std::string_view name) {
  return "unknown effect \"" + std::string(name) +
         "\" (use NoSchedule, PreferNoSchedule or NoExecute)";
}

// The effect after the colon at `colon` in `text`; the error quotes the whole text.
StatusOr<TaintEffect> EffectAfter(std::string_view text, size_t colon, std::string_view field) {
  const std::string_view name = text.substr(colon + 1);
  auto effect = ParseTaintEffect(name, field);
  if (!effect.ok()) return Bad(field, text, UnknownEffect(name));
  return effect;
}

}  // namespace

const char* TaintEffectName(TaintEffect effect) {
  switch (effect) {
    case TaintEffect::kNoSchedule: return "NoSchedule";
    case TaintEffect::kPreferNoSchedule: return "PreferNoSchedule";
    case TaintEffect::kNoExecute: return "NoExecute";
  }
  return "NoSchedule";
}

StatusOr<TaintEffect> ParseTaintEffect(std::string_view text, std::string_view field) {
  for (TaintEffect e :
       {TaintEffect::kNoSchedule, TaintEffect::kPreferNoSchedule, TaintEffect::kNoExecute}) {
    if (text == TaintEffectName(e)) return e;
  }
  return InvalidArgument(std::string(field) + ": " + UnknownEffect(text));
}

Status ValidateLabel(std::string_view key, std::string_view value, std::string_view field,
                     std::string_view text) {
  if (key.empty()) return Bad(field, text, "the key is empty");
  const size_t slash = key.find('/');
  const std::string_view name = slash == std::string_view::npos ? key : key.substr(slash + 1);
  if (slash != std::string_view::npos && !IsDnsSubdomain(key.substr(0, slash))) {
    return Bad(field, text,
               "the key's prefix \"" + std::string(key.substr(0, slash)) +
                   "\" is not a DNS subdomain (lower-case letters, digits, '-' and '.')");
  }
  if (!IsLabelName(name)) {
    return Bad(field, text,
               "the key \"" + std::string(key) +
                   "\" is not a label name (1-63 letters, digits, '-', '_' or '.', beginning "
                   "and ending with a letter or digit)");
  }
  if (!value.empty() && !IsLabelName(value)) {
    return Bad(field, text,
               "the value \"" + std::string(value) +
                   "\" is not a label value (up to 63 letters, digits, '-', '_' or '.', "
                   "beginning and ending with a letter or digit)");
  }
  return Status::Ok();
}

StatusOr<std::pair<std::string, std::string>> ParseLabel(std::string_view text,
                                                         std::string_view field) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) return Bad(field, text, "not KEY=VALUE");
  const std::string_view key = text.substr(0, eq), value = text.substr(eq + 1);
  GS_RETURN_IF_ERROR(ValidateLabel(key, value, field, text));
  return std::pair<std::string, std::string>(key, value);
}

StatusOr<Taint> ParseTaint(std::string_view text, std::string_view field) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    return Bad(field, text,
               "not KEY=VALUE:EFFECT (EFFECT: NoSchedule, PreferNoSchedule or NoExecute)");
  }
  const std::string_view rule = text.substr(0, colon);
  const size_t eq = rule.find('=');
  Taint t;
  t.key = std::string(rule.substr(0, eq));
  if (eq != std::string_view::npos) t.value = std::string(rule.substr(eq + 1));
  GS_RETURN_IF_ERROR(ValidateLabel(t.key, t.value, field, text));
  GS_ASSIGN_OR_RETURN(t.effect, EffectAfter(text, colon, field));
  return t;
}

StatusOr<Toleration> ParseToleration(std::string_view text, std::string_view field) {
  Toleration t;
  if (text == "*") {
    t.exists = true;
    return t;
  }
  const size_t colon = text.rfind(':');
  const std::string_view rule = colon == std::string_view::npos ? text : text.substr(0, colon);
  if (colon != std::string_view::npos) {
    GS_ASSIGN_OR_RETURN(t.effect, EffectAfter(text, colon, field));
    t.has_effect = true;
  }
  const size_t eq = rule.find('=');
  t.exists = eq == std::string_view::npos;
  t.key = std::string(rule.substr(0, eq));
  if (!t.exists) t.value = std::string(rule.substr(eq + 1));
  GS_RETURN_IF_ERROR(ValidateLabel(t.key, t.value, field, text));
  return t;
}

std::string FormatTaint(const Taint& taint) {
  return taint.key + (taint.value.empty() ? "" : "=" + taint.value) + ":" +
         TaintEffectName(taint.effect);
}

}  // namespace gpusched::core
