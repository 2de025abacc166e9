// Team quotas and accounting: `gpusched quota set TEAM --gpus N [--gpu-mem SIZE] [--borrow M]`,
// `gpusched quota ls [--json]` and `gpusched acct [--user U] [--team T] [--since D]
// [--until D] [--json]` (issue 11; core/quota.h, server/accounting.h).

#include <chrono>
#include <cstdio>
#include <iostream>

#include "base/units.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "core/quota.h"

namespace gpusched::cli {
namespace {

// The CLI is a process edge: it reads the real clock once, for relative --since/--until.
int64_t WallNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string BorrowText(int64_t borrow) {
  return borrow == core::kUnlimitedBorrow ? "unlimited" : std::to_string(borrow);
}

nlohmann::json QuotaJson(const v1::TeamQuotaStatus& t) {
  return {{"team", t.quota().team()},
          {"has_quota", t.quota_set()},
          {"guaranteed_gpus", t.quota().guaranteed_gpus()},
          {"guaranteed_gpu_mem_mib", t.quota().guaranteed_gpu_mem_mib()},
          {"borrow_gpus", t.quota().borrow_gpus()},  // -1 = unlimited
          {"used_gpus", t.used_gpus()},
          {"used_gpu_mem_mib", t.used_gpu_mem_mib()},
          {"borrowed_gpus", t.borrowed_gpus()},
          {"running", t.running()},
          {"pending", t.pending()}};
}

struct QuotaSetFlags {
  std::string team, gpus, gpu_mem, borrow = "0";
};

void RegisterQuota(CLI::App& app) {
  CLI::App* quota = app.add_subcommand("quota", "Team GPU quotas with borrowing (admin)");
  quota->require_subcommand(1);

  auto flags = std::make_shared<ClientFlags>();
  auto f = std::make_shared<QuotaSetFlags>();
  CLI::App* set = quota->add_subcommand(
      "set", "Set a team's guaranteed GPUs (and GPU memory) and how many more it may borrow");
  AddClientFlags(set, *flags);
  set->add_option("TEAM", f->team, "Team name")->required();
  set->add_option("--gpus", f->gpus, "Guaranteed GPUs")->required();
  set->add_option("--gpu-mem", f->gpu_mem, "Guaranteed GPU memory in all, e.g. 320GiB");
  set->add_option("--borrow", f->borrow,
                  "GPUs it may use beyond the guarantee while others leave them idle "
                  "(a count or unlimited; default 0)");
  set->callback([flags, f, set] {
    v1::SetQuotaRequest req;
    v1::TeamQuota* q = req.mutable_quota();
    q->set_team(f->team);
    q->set_guaranteed_gpus(OrFail(core::ParseGpuCount(f->gpus, "--gpus", false)));
    if (set->count("--gpu-mem")) {
      q->set_guaranteed_gpu_mem_mib(OrFail(ParseSizeMiB(f->gpu_mem, "--gpu-mem")));
    }
    q->set_borrow_gpus(OrFail(core::ParseGpuCount(f->borrow, "--borrow", true)));
    Client c(flags->server);
    v1::SetQuotaResponse resp;
    Status s =
        c.Call([&](grpc::ClientContext& ctx) { return c.stub().SetQuota(&ctx, req, &resp); });
    if (!s.ok()) Fail(s);
    const v1::TeamQuota& r = resp.quota();
    if (flags->json) {
      std::cout << nlohmann::json{{"team", r.team()},
                                  {"guaranteed_gpus", r.guaranteed_gpus()},
                                  {"guaranteed_gpu_mem_mib", r.guaranteed_gpu_mem_mib()},
                                  {"borrow_gpus", r.borrow_gpus()}}
                       .dump()
                << "\n";
      return;
    }
    std::cout << "team " << r.team() << ": " << r.guaranteed_gpus() << " GPUs guaranteed"
              << (r.guaranteed_gpu_mem_mib() > 0
                      ? " (" + FormatSizeMiB(r.guaranteed_gpu_mem_mib()) + " GPU memory)"
                      : std::string())
              << ", borrows up to " << BorrowText(r.borrow_gpus()) << " more\n";
  });

  auto ls_flags = std::make_shared<ClientFlags>();
  CLI::App* ls = quota->add_subcommand("ls", "Teams: quota, GPUs in use, borrowed, pending");
  AddClientFlags(ls, *ls_flags);
  ls->callback([ls_flags] {
    Client c(ls_flags->server);
    v1::ListQuotasRequest req;
    v1::ListQuotasResponse resp;
    Status s =
        c.Call([&](grpc::ClientContext& ctx) { return c.stub().ListQuotas(&ctx, req, &resp); });
    if (!s.ok()) Fail(s);
    if (ls_flags->json) {
      nlohmann::json a = nlohmann::json::array();
      for (const v1::TeamQuotaStatus& t : resp.teams()) a.push_back(QuotaJson(t));
      std::cout << a.dump() << "\n";
      return;
    }
    std::vector<std::vector<std::string>> rows{
        {"TEAM", "GUARANTEED", "GPU MEM", "BORROW", "USED", "BORROWED", "RUNNING", "PENDING"}};
    for (const v1::TeamQuotaStatus& t : resp.teams()) {
      rows.push_back({t.quota().team(),
                      t.quota_set() ? std::to_string(t.quota().guaranteed_gpus()) : "-",
                      t.quota().guaranteed_gpu_mem_mib() > 0
                          ? FormatSizeMiB(t.quota().guaranteed_gpu_mem_mib())
                          : "-",
                      BorrowText(t.quota().borrow_gpus()), std::to_string(t.used_gpus()),
                      std::to_string(t.borrowed_gpus()), std::to_string(t.running()),
                      std::to_string(t.pending())});
    }
    PrintTable(std::cout, rows);
  });
}

struct AcctFlags {
  std::string user, team, since = "30d", until;
};

void RegisterAcct(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto f = std::make_shared<AcctFlags>();
  CLI::App* cmd = app.add_subcommand(
      "acct", "GPU-hours and GPU-memory-GiB-hours per user and team over a window");
  AddClientFlags(cmd, *flags);
  cmd->add_option("--user", f->user, "Only this user");
  cmd->add_option("--team", f->team, "Only this team");
  cmd->add_option("--since", f->since,
                  "Start: 2026-11-30, 2026-11-30T12:00:00Z (UTC) or a time ago: 7d, 12h "
                  "(default 30d)");
  cmd->add_option("--until", f->until, "End, in the same forms (default now)");
  cmd->callback([flags, f] {
    const int64_t now = WallNowMs();
    v1::AccountingRequest req;
    req.set_user(f->user);
    req.set_team(f->team);
    req.set_since_ms(OrFail(ParseTimePointMs(f->since, "--since", now)));
    req.set_until_ms(f->until.empty() ? now : OrFail(ParseTimePointMs(f->until, "--until", now)));
    if (req.since_ms() >= req.until_ms()) {
      Fail(InvalidArgument("--since: \"" + f->since + "\" is not before --until (\"" +
                           (f->until.empty() ? std::string("now") : f->until) + "\")"));
    }
    Client c(flags->server);
    v1::AccountingResponse resp;
    Status s =
        c.Call([&](grpc::ClientContext& ctx) { return c.stub().GetAccounting(&ctx, req, &resp); });
    if (!s.ok()) Fail(s);
    auto row_json = [](const v1::AccountingRow& r) {
      nlohmann::json j = {{"team", r.team()},
                          {"gpu_hours", r.gpu_hours()},
                          {"gpu_mem_gib_hours", r.gpu_mem_gib_hours()},
                          {"tasks", r.tasks()}};
      if (!r.user().empty()) j["user"] = r.user();
      return j;
    };
    if (flags->json) {
      nlohmann::json users = nlohmann::json::array(), teams = nlohmann::json::array();
      for (const v1::AccountingRow& r : resp.users()) users.push_back(row_json(r));
      for (const v1::AccountingRow& r : resp.teams()) teams.push_back(row_json(r));
      std::cout << nlohmann::json{{"since_ms", resp.since_ms()},
                                  {"until_ms", resp.until_ms()},
                                  {"users", users},
                                  {"teams", teams}}
                       .dump()
                << "\n";
      return;
    }
    auto hours = [](double h) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f", h);
      return std::string(buf);
    };
    std::vector<std::vector<std::string>> rows{
        {"TEAM", "USER", "GPU-HOURS", "GPU-MEM GiB-HOURS", "TASKS"}};
    for (const v1::AccountingRow& r : resp.users()) {
      rows.push_back({r.team(), r.user(), hours(r.gpu_hours()), hours(r.gpu_mem_gib_hours()),
                      std::to_string(r.tasks())});
    }
    for (const v1::AccountingRow& r : resp.teams()) {
      rows.push_back({r.team(), "(all)", hours(r.gpu_hours()), hours(r.gpu_mem_gib_hours()),
                      std::to_string(r.tasks())});
    }
    PrintTable(std::cout, rows);
  });
}

}  // namespace

void RegisterQuotaCommands(CLI::App& app) {
  RegisterQuota(app);
  RegisterAcct(app);
}

}  // namespace gpusched::cli
