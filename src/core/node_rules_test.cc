// Node rules as text (`--label`, `--taint`, `--selector`, `--toleration`) and what the
// filters of CN115981827A claim 1 make of them.

#include "core/node_rules.h"

#include <gtest/gtest.h>

#include "core/filters.h"

namespace gpusched::core {
namespace {

TEST(NodeRules, LabelsParseAndBadOnesNameTheFlagAndValue) {
  auto l = ParseLabel("gpu=a100", "--label");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->first, "gpu");
  EXPECT_EQ(l->second, "a100");
  auto prefixed = ParseLabel("gpusched.io/zone=", "--label");
  ASSERT_TRUE(prefixed.ok()) << prefixed.status().ToString();
  EXPECT_EQ(prefixed->first, "gpusched.io/zone");
  EXPECT_EQ(prefixed->second, "");

  EXPECT_EQ(ParseLabel("=x", "--label").status().message(),
            "--label: \"=x\": the key is empty");
  EXPECT_EQ(ParseLabel("gpu", "--selector").status().message(),
            "--selector: \"gpu\": not KEY=VALUE");
  for (const char* bad : {"-gpu=a", "gp u=a", "a=b c", "a=-b", "Big.Corp/x=1", "a/=1",
                          "a=1234567890123456789012345678901234567890123456789012345678901234"}) {
    auto s = ParseLabel(bad, "--label");
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(s.status().message().rfind("--label: \"" + std::string(bad) + "\": ", 0), 0u)
        << s.status().message();
  }
}

TEST(NodeRules, TaintsParseWithEveryEffectAndRoundTrip) {
  for (TaintEffect e :
       {TaintEffect::kNoSchedule, TaintEffect::kPreferNoSchedule, TaintEffect::kNoExecute}) {
    const std::string text = std::string("dedicated=infer:") + TaintEffectName(e);
    auto t = ParseTaint(text, "--taint");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(*t, (Taint{"dedicated", "infer", e}));
    EXPECT_EQ(FormatTaint(*t), text);
  }
  auto no_value = ParseTaint("gpu-maintenance:NoSchedule", "--taint");
  ASSERT_TRUE(no_value.ok());
  EXPECT_EQ(*no_value, (Taint{"gpu-maintenance", "", TaintEffect::kNoSchedule}));
  EXPECT_EQ(FormatTaint(*no_value), "gpu-maintenance:NoSchedule");
}

TEST(NodeRules, BadTaintsNameTheFlagAndTheValue) {
  EXPECT_EQ(ParseTaint("a=b:Sometimes", "--taint").status().message(),
            "--taint: \"a=b:Sometimes\": unknown effect \"Sometimes\" (use NoSchedule, "
            "PreferNoSchedule or NoExecute)");
  EXPECT_EQ(ParseTaint("a=b", "--taint").status().message(),
            "--taint: \"a=b\": not KEY=VALUE:EFFECT (EFFECT: NoSchedule, PreferNoSchedule or "
            "NoExecute)");
  EXPECT_EQ(ParseTaint("=b:NoSchedule", "--taint").status().message(),
            "--taint: \"=b:NoSchedule\": the key is empty");
  EXPECT_EQ(ParseTaintEffect("noschedule", "register.taints[0].effect").status().message(),
            "register.taints[0].effect: unknown effect \"noschedule\" (use NoSchedule, "
            "PreferNoSchedule or NoExecute)");
}

TEST(NodeRules, TolerationsEqualExistsAndEveryTaint) {
  auto equal = ParseToleration("dedicated=infer:NoSchedule", "--toleration");
  ASSERT_TRUE(equal.ok());
  EXPECT_EQ(*equal, (Toleration{"dedicated", "infer", false, true, TaintEffect::kNoSchedule}));
  auto exists = ParseToleration("dedicated", "--toleration");
  ASSERT_TRUE(exists.ok());
  EXPECT_EQ(*exists, (Toleration{"dedicated", "", true, false, TaintEffect::kNoSchedule}));
  auto exists_effect = ParseToleration("dedicated:NoExecute", "--toleration");
  ASSERT_TRUE(exists_effect.ok());
  EXPECT_EQ(*exists_effect, (Toleration{"dedicated", "", true, true, TaintEffect::kNoExecute}));
  auto all = ParseToleration("*", "--toleration");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (Toleration{"", "", true, false, TaintEffect::kNoSchedule}));
  EXPECT_EQ(ParseToleration("a=b:Sometimes", "--toleration").status().message(),
            "--toleration: \"a=b:Sometimes\": unknown effect \"Sometimes\" (use NoSchedule, "
            "PreferNoSchedule or NoExecute)");
  EXPECT_EQ(ParseToleration("=b", "--toleration").status().message(),
            "--toleration: \"=b\": the key is empty");
}

// What the parsed rules do in the filters: a node tainted from the command line rejects a
// task until the task tolerates the taint; a selector from the command line picks by label.
TEST(NodeRules, CN115981827A_Claim1_ParsedRulesDriveTheTaintAndSelectorFilters) {
  NodeState n;
  n.name = "gpu1";
  n.capacity = {8000, 1024};
  n.taints = {*ParseTaint("dedicated=infer:NoSchedule", "--taint"),
              *ParseTaint("soft=yes:PreferNoSchedule", "--taint")};
  auto [key, value] = *ParseLabel("zone=b", "--label");
  n.labels[key] = value;

  PlacementRequest r;
  EXPECT_EQ(FirstRejectingFilter(n, r, {}), kFilterTaintToleration);
  const std::vector<Toleration> wrong = {*ParseToleration("dedicated=train", "--toleration")};
  r.tolerations = &wrong;
  EXPECT_EQ(FirstRejectingFilter(n, r, {}), kFilterTaintToleration);
  const std::vector<Toleration> right = {
      *ParseToleration("dedicated=infer:NoSchedule", "--toleration")};
  r.tolerations = &right;
  EXPECT_EQ(FirstRejectingFilter(n, r, {}), kNumFilters);  // PreferNoSchedule never filters

  auto [skey, svalue] = *ParseLabel("zone=a", "--selector");
  const std::map<std::string, std::string> other_zone = {{skey, svalue}};
  r.node_selector = &other_zone;
  EXPECT_EQ(FirstRejectingFilter(n, r, {}), kFilterNodeSelector);
  const std::map<std::string, std::string> this_zone = {{"zone", "b"}};
  r.node_selector = &this_zone;
  EXPECT_EQ(FirstRejectingFilter(n, r, {}), kNumFilters);
}

}  // namespace
}  // namespace gpusched::core
