// Client commands about nodes: nodes, cordon, uncordon, drain.

#include <iostream>

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

void RegisterNodes(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  CLI::App* cmd = app.add_subcommand("nodes", "List nodes and their GPUs");
  AddClientFlags(cmd, *flags);
  cmd->callback([flags] {
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
    std::vector<std::vector<std::string>> rows{
        {"NAME", "STATE", "GPUS", "GPU MEMORY (alloc/total)", "TASKS", "ADDRESS", "GPU HEALTH"}};
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
                      std::to_string(n.running_tasks()), n.address(), GpuHealthText(n)});
    }
    PrintTable(std::cout, rows);
  });
}

// cordon / uncordon / drain NODE.
void RegisterNodeAction(CLI::App& app, const std::string& name, const std::string& help) {
  auto flags = std::make_shared<ClientFlags>();
  auto node = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(name, help);
  AddClientFlags(cmd, *flags);
  cmd->add_option("NODE", *node, "Node name")->required();
  cmd->callback([flags, node, name] {
    Client c(flags->server);
    v1::NodeResponse resp;
    Status s;
    if (name == "drain") {
      v1::DrainRequest req;
      req.set_node(*node);
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
                << (name == "drain" ? "drained" : name == "cordon" ? "cordoned" : "uncordoned")
                << "\n";
    }
  });
}

}  // namespace

void RegisterNodeCommands(CLI::App& app) {
  RegisterNodes(app);
  RegisterNodeAction(app, "cordon", "Stop placing new tasks on a node");
  RegisterNodeAction(app, "uncordon", "Allow new tasks on a node again");
  RegisterNodeAction(app, "drain", "Cordon a node and move its tasks elsewhere");
}

}  // namespace gpusched::cli
