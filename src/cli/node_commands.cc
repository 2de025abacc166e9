// Client commands about nodes: nodes, cordon, uncordon, drain, node rm.

#include <algorithm>
#include <iostream>
#include <map>

#include "base/units.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/output.h"

namespace gpusched::cli {
namespace {

// "ok", or each GPU that is unhealthy or has had a fault: "1 unhealthy: Xid 79; 0 ok, last:
// ECC double-bit".
std::string GpuHealthText(const v1::Node& n) {
  std::string out;
  for (const v1::Gpu& g : n.gpus()) {
    if (!g.unhealthy() && g.last_error().empty()) continue;
    out += (out.empty() ? "" : "; ") + std::to_string(g.index()) +
           (g.unhealthy() ? " unhealthy: " + g.last_error() : " ok, last: " + g.last_error());
  }
  return out.empty() ? "ok" : out;
}

// "zone=a,gpu=a100" and "dedicated=infer:NoSchedule": the rules tasks must meet there
// (CN115981827A claim 1); "-" when there are none.
std::string LabelsText(const v1::Node& n) {
  const std::map<std::string, std::string> labels(n.labels().begin(), n.labels().end());
  std::string out;
  for (const auto& [k, v] : labels) {
    out += (out.empty() ? "" : ",") + k + "=" + v;
  }
  return out.empty() ? "-" : out;
}

std::string TaintsText(const v1::Node& n) {
  std::string out;
  for (const v1::Taint& t : n.taints()) {
    out += (out.empty() ? "" : ",") + t.key() + (t.value().empty() ? "" : "=" + t.value()) +
           ":" + t.effect();
  }
  return out.empty() ? "-" : out;
}

// `nodes -v`: one row per GPU, since a node's total can hide that no single GPU has room.
void PrintGpus(const v1::ListNodesResponse& resp) {
  std::vector<std::vector<std::string>> rows{{"NODE", "GPU", "MODEL", "FREE", "TOTAL", "TASKS"}};
  for (const v1::Node& n : resp.nodes()) {
    for (const v1::Gpu& g : n.gpus()) {
      rows.push_back({n.name(), std::to_string(g.index()), g.model(),
                      FormatSizeMiB(std::max<MiB>(0, g.total_mib() - g.allocated_mib())),
                      FormatSizeMiB(g.total_mib()), std::to_string(g.tasks())});
    }
  }
  PrintTable(std::cout, rows);
}

void RegisterNodes(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto verbose = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("nodes", "List nodes and their GPUs");
  AddClientFlags(cmd, *flags);
  cmd->add_flag("-v,--verbose", *verbose, "One row per GPU: its free memory and tasks");
  cmd->callback([flags, verbose] {
    Client c(flags->server);
    v1::ListNodesRequest req;
    v1::ListNodesResponse resp;
    Status s =
        c.Call([&](grpc::ClientContext& ctx) { return c.stub().ListNodes(&ctx, req, &resp); });
    if (!s.ok()) Fail(s);
    if (flags->json) {
      nlohmann::json a = nlohmann::json::array();
      for (const v1::Node& n : resp.nodes()) a.push_back(NodeJson(n));
      std::cout << a.dump() << "\n";
      return;
    }
    if (*verbose) return PrintGpus(resp);
    std::vector<std::vector<std::string>> rows{
        {"NAME", "STATE", "GPUS", "GPU MEMORY (alloc/total)", "TASKS", "ADDRESS", "GPU HEALTH",
         "LABELS", "TAINTS"}};
    for (const v1::Node& n : resp.nodes()) {
      MiB total = 0, alloc = 0;
      for (const v1::Gpu& g : n.gpus()) {
        total += g.total_mib();
        alloc += g.allocated_mib();
      }
      rows.push_back({n.name(), rpc::NodeStateName(n),
                      std::to_string(n.gpus_size()) +
                          (n.gpus_size() ? " x " + n.gpus(0).model() : ""),
                      FormatSizeMiB(alloc) + " / " + FormatSizeMiB(total),
                      std::to_string(n.running_tasks()), n.address(), GpuHealthText(n),
                      LabelsText(n), TaintsText(n)});
    }
    PrintTable(std::cout, rows);
    if (!resp.eviction_hold().empty()) {
      std::cout << "evictions held: " << resp.eviction_hold() << "\n";
    }
  });
}

// cordon / uncordon / drain NODE.
void RegisterNodeAction(CLI::App& app, const std::string& name, const std::string& help) {
  auto flags = std::make_shared<ClientFlags>();
  auto node = std::make_shared<std::string>();
  auto evict = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(name, help);
  AddClientFlags(cmd, *flags);
  cmd->add_option("NODE", *node, "Node name")->required();
  if (name == "drain") {
    cmd->add_flag("--evict", *evict, "Stop its running tasks now and requeue them elsewhere");
  }
  cmd->callback([flags, node, name, evict] {
    Client c(flags->server);
    v1::NodeResponse resp;
    Status s;
    if (name == "drain") {
      v1::DrainRequest req;
      req.set_node(*node);
      req.set_evict(*evict);
      s = c.Call([&](grpc::ClientContext& ctx) { return c.stub().Drain(&ctx, req, &resp); });
    } else {
      v1::CordonRequest req;
      req.set_node(*node);
      req.set_cordon(name == "cordon");
      s = c.Call([&](grpc::ClientContext& ctx) { return c.stub().Cordon(&ctx, req, &resp); });
    }
    if (!s.ok()) Fail(s);
    if (flags->json) {
      std::cout << NodeJson(resp.node()).dump() << "\n";
    } else {
      std::cout << "node " << *node << " "
                << (name == "drain" ? rpc::NodeStateName(resp.node())
                    : name == "cordon" ? "cordoned"
                                       : "uncordoned");
      if (name == "drain" && !*evict && resp.node().running_tasks() > 0) {
        std::cout << ": its " << resp.node().running_tasks()
                  << " running task(s) finish there, no new ones start (--evict stops them)";
      }
      std::cout << "\n";
    }
  });
}

// Issue 39: `node rm NAME [--force]`, a node that left (autoscaling, a retired machine).
void RegisterNodeRemove(CLI::App& app) {
  CLI::App* group = app.add_subcommand("node", "Manage one node (node rm NAME)");
  group->require_subcommand(1);
  auto flags = std::make_shared<ClientFlags>();
  auto node = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  CLI::App* cmd = group->add_subcommand(
      "rm", "Forget a node that left: gone from `nodes`, the store and the wait after a restart");
  AddClientFlags(cmd, *flags);
  cmd->add_option("NODE", *node, "Node name")->required();
  cmd->add_flag("--force", *force,
                "Remove it although tasks run there: they are stopped and requeued (not counted "
                "as failures)");
  cmd->callback([flags, node, force] {
    Client c(flags->server);
    v1::RemoveNodeRequest req;
    req.set_node(*node);
    req.set_force(*force);
    v1::RemoveNodeResponse resp;
    Status s =
        c.Call([&](grpc::ClientContext& ctx) { return c.stub().RemoveNode(&ctx, req, &resp); });
    if (!s.ok()) Fail(s);
    if (flags->json) {
      nlohmann::json j = {{"node", resp.node()}, {"removed", true},
                          {"requeued", nlohmann::json::array()}};
      for (uint64_t id : resp.requeued()) j["requeued"].push_back(id);
      std::cout << j.dump() << "\n";
      return;
    }
    std::cout << "node " << resp.node() << " removed";
    if (resp.requeued_size() > 0) {
      std::cout << "; requeued task(s)";
      for (uint64_t id : resp.requeued()) std::cout << " " << id;
    }
    std::cout << "\n";
  });
}

}  // namespace

void RegisterNodeCommands(CLI::App& app) {
  RegisterNodes(app);
  RegisterNodeAction(app, "cordon", "Stop placing new tasks on a node");
  RegisterNodeAction(app, "uncordon", "Allow new tasks on a node again");
  RegisterNodeAction(app, "drain",
                     "Cordon a node and let its running tasks finish (--evict: requeue them)");
  RegisterNodeRemove(app);
}

}  // namespace gpusched::cli
