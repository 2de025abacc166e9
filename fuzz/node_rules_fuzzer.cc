// Node rules as users type them (core/node_rules.h): `agent --label K=V`, `--taint
// K[=V]:EFFECT`, `submit --selector K=V`, `--toleration K[=V][:EFFECT]`. Errors are
// InvalidArgument naming the flag and quoting the input; a taint that parses formats back to
// the same text (or, without a value, to the same taint); what parses is a valid label.

#include <string>

#include "core/node_rules.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched;
  const std::string_view text = fuzz::Text(data, size);
  const std::string shown(text);
  auto bad = [&](const Status& s, const std::string& flag) {
    FUZZ_REQUIRE(s.code() == StatusCode::kInvalidArgument, s.ToString());
    FUZZ_REQUIRE(s.message().starts_with(flag + ": "), s.ToString());
  };
  if (auto label = core::ParseLabel(text, "--label"); label.ok()) {
    FUZZ_REQUIRE(label->first + "=" + label->second == shown, shown);
    FUZZ_REQUIRE(core::ValidateLabel(label->first, label->second, "--label", text).ok(), shown);
  } else {
    bad(label.status(), "--label");
    FUZZ_REQUIRE(label.status().message().starts_with("--label: \"" + shown + "\": "),
                 label.status().ToString());
  }
  if (auto taint = core::ParseTaint(text, "--taint"); taint.ok()) {
    const std::string printed = core::FormatTaint(*taint);
    auto back = core::ParseTaint(printed, "--taint");
    FUZZ_REQUIRE(back.ok() && *back == *taint, shown + " -> " + printed);
    FUZZ_REQUIRE(core::ValidateLabel(taint->key, taint->value, "--taint", text).ok(), shown);
  } else {
    bad(taint.status(), "--taint");
  }
  if (auto tol = core::ParseToleration(text, "--toleration"); tol.ok()) {
    FUZZ_REQUIRE(tol->exists || !tol->key.empty(), shown);
    FUZZ_REQUIRE(!tol->exists || tol->value.empty(), shown);
  } else {
    bad(tol.status(), "--toleration");
  }
  if (auto effect = core::ParseTaintEffect(text, "effect"); effect.ok()) {
    FUZZ_REQUIRE(core::TaintEffectName(*effect) == shown, shown);
  } else {
    bad(effect.status(), "effect");
  }
  return 0;
}
