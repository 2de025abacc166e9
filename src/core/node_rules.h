#pragma once
// Kubernetes-style node rules as text: node labels (`K=V`), taints (`K=V:EFFECT`) and a task's
// selector terms and tolerations, as the command line, the agent's registration and the task
// YAML write them. CN115981827A claim 1 pre-filters with these rules after GPU fit
// (filters TaintToleration and NodeSelector, core/filters.h).
//
// Keys and values follow Kubernetes' label syntax, so a rule that works here works in a pod:
//   key   = [prefix/]name; name 1-63 characters [A-Za-z0-9._-], beginning and ending with a
//           letter or digit; prefix (a DNS subdomain) up to 253 characters [a-z0-9.-]
//   value = "" or 1-63 characters like a name
// Every error names the field (a flag such as "--taint", or a wire or YAML field) and the
// whole text given, e.g. --taint: "a=b:Sometimes": unknown effect "Sometimes" (use
// NoSchedule, PreferNoSchedule or NoExecute).

#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"
#include "core/node.h"

namespace gpusched::core {

// "NoSchedule", "PreferNoSchedule" or "NoExecute".
const char* TaintEffectName(TaintEffect effect);
// The inverse of TaintEffectName; InvalidArgument naming `field` and `text` otherwise.
StatusOr<TaintEffect> ParseTaintEffect(std::string_view text, std::string_view field);

// Checks a label (or taint) key and value; the error names `field` and `text` (what the user
// wrote, for the message).
Status ValidateLabel(std::string_view key, std::string_view value, std::string_view field,
                     std::string_view text);

// "KEY=VALUE" (VALUE may be empty) -> {key, value}: `--label`, `--selector`.
StatusOr<std::pair<std::string, std::string>> ParseLabel(std::string_view text,
                                                         std::string_view field);

// "KEY[=VALUE]:EFFECT" -> Taint: `--taint`. The effect is required, as in `kubectl taint`.
StatusOr<Taint> ParseTaint(std::string_view text, std::string_view field);

// `--toleration`: "KEY=VALUE[:EFFECT]" (operator Equal), "KEY[:EFFECT]" (operator Exists: any
// value) or "*" (Exists with an empty key: every taint). Without an effect it tolerates
// every effect.
StatusOr<Toleration> ParseToleration(std::string_view text, std::string_view field);

// "KEY=VALUE:EFFECT" ("KEY:EFFECT" when the value is empty): ParseTaint reads it back.
std::string FormatTaint(const Taint& taint);

}  // namespace gpusched::core
