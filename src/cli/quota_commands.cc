// Team quotas and accounting: `gpusched quota set TEAM --gpus N [--gpu-mem SIZE] [--borrow M]
// [--max-priority CLASS]`, `gpusched quota ls [--json]` and `gpusched acct [--user U]
// [--team T] [--since D] [--until D] [--json]` (issue 11; core/quota.h, server/accounting.h);
// and what the GPU-memory table learned: `gpusched profile ls [--json]`, `gpusched profile rm
// KEY` (issue 36; admin).

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
          {"pending", t.pending()},
          {"max_priority", t.quota().max_priority()},        // the team's own grant; "" = none
          {"granted_priority", t.granted_priority()}};       // in force; "" = every class
}

// One call `rpc(stub, ctx, &resp)` to `server`; a failure exits with its code and message.
template <typename Resp, typename Rpc>
Resp CallOrFail(const std::string& server, Rpc&& rpc) {
  Client c(server);
  Resp resp;
  Status s = c.Call([&](grpc::ClientContext& ctx) { return rpc(c.stub(), ctx, &resp); });
  if (!s.ok()) Fail(s);
  return resp;
}

// Prints `items` as one JSON array on a line, each item through `to_json`.
template <typename Items, typename ToJson>
void PrintJsonArray(const Items& items, ToJson to_json) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& item : items) a.push_back(to_json(item));
  std::cout << a.dump() << "\n";
}

struct QuotaSetFlags {
  std::string team, gpus, gpu_mem, borrow = "0", max_priority;
};

std::string GrantText(const v1::TeamQuotaStatus& t) {
  return t.granted_priority().empty() ? "any" : t.granted_priority();
}

// The SetQuota request of `quota set`: the whole quota with --gpus, else only the grant.
v1::SetQuotaRequest QuotaSetRequest(const QuotaSetFlags& f, CLI::App* set) {
  v1::SetQuotaRequest req;
  v1::TeamQuota* q = req.mutable_quota();
  q->set_team(f.team);
  const bool grant_only = !set->count("--gpus");
  if (grant_only && !set->count("--max-priority")) {
    Fail(InvalidArgument("--gpus: required (or --max-priority CLASS to change only the "
                         "team's priority grant)"));
  }
  if (grant_only && (set->count("--gpu-mem") || set->count("--borrow"))) {
    Fail(InvalidArgument("--gpu-mem and --borrow need --gpus (the whole quota is set)"));
  }
  if (set->count("--max-priority") && f.max_priority.empty()) {
    Fail(InvalidArgument("--max-priority: \"\" is not a class (a class name, or none)"));
  }
  req.set_keep_guarantee(grant_only);
  q->set_max_priority(f.max_priority);
  if (!grant_only) {
    q->set_guaranteed_gpus(OrFail(core::ParseGpuCount(f.gpus, "--gpus", false)));
    if (set->count("--gpu-mem")) {
      q->set_guaranteed_gpu_mem_mib(OrFail(ParseSizeMiB(f.gpu_mem, "--gpu-mem")));
    }
    q->set_borrow_gpus(OrFail(core::ParseGpuCount(f.borrow, "--borrow", true)));
  }
  return req;
}

void PrintQuotaSet(const v1::TeamQuota& r, bool json) {
  if (json) {
    std::cout << nlohmann::json{{"team", r.team()},
                                {"guaranteed_gpus", r.guaranteed_gpus()},
                                {"guaranteed_gpu_mem_mib", r.guaranteed_gpu_mem_mib()},
                                {"borrow_gpus", r.borrow_gpus()},
                                {"max_priority", r.max_priority()}}
                     .dump()
              << "\n";
    return;
  }
  std::cout << "team " << r.team() << ": " << r.guaranteed_gpus()
            << (r.guaranteed_gpus() == 1 ? " GPU guaranteed" : " GPUs guaranteed")
            << (r.guaranteed_gpu_mem_mib() > 0
                    ? " (" + FormatSizeMiB(r.guaranteed_gpu_mem_mib()) + " GPU memory)"
                    : std::string())
            << (r.borrow_gpus() == core::kUnlimitedBorrow
                    ? std::string(", borrows without limit")
                    : ", borrows up to " + BorrowText(r.borrow_gpus()) + " more")
            << (r.max_priority().empty() ? std::string()
                                         : ", priority up to " + r.max_priority())
            << "\n";
}

void RegisterQuotaSet(CLI::App& quota) {
  auto flags = std::make_shared<ClientFlags>();
  auto f = std::make_shared<QuotaSetFlags>();
  CLI::App* set = quota.add_subcommand(
      "set", "Set a team's guaranteed GPUs (and GPU memory) and how many more it may borrow");
  AddClientFlags(set, *flags);
  set->add_option("TEAM", f->team, "Team name")->required();
  set->add_option("--gpus", f->gpus, "Guaranteed GPUs (required unless --max-priority alone)");
  set->add_option("--gpu-mem", f->gpu_mem, "Guaranteed GPU memory in all, e.g. 320GiB");
  set->add_option("--borrow", f->borrow,
                  "GPUs it may use beyond the guarantee while others leave them idle "
                  "(a count or unlimited; default 0)");
  set->add_option("--max-priority", f->max_priority,
                  "Highest priority class the team may submit (e.g. high; none = the "
                  "server's default grant). Without --gpus only the grant changes");
  set->callback([flags, f, set] {
    const v1::SetQuotaRequest req = QuotaSetRequest(*f, set);
    Client c(flags->server);
    v1::SetQuotaResponse resp;
    Status s =
        c.Call([&](grpc::ClientContext& ctx) { return c.stub().SetQuota(&ctx, req, &resp); });
    if (!s.ok()) Fail(s);
    PrintQuotaSet(resp.quota(), flags->json);
  });
}

void RegisterQuotaLs(CLI::App& quota) {
  auto ls_flags = std::make_shared<ClientFlags>();
  CLI::App* ls = quota.add_subcommand("ls", "Teams: quota, GPUs in use, borrowed, pending");
  AddClientFlags(ls, *ls_flags);
  ls->callback([ls_flags] {
    const auto resp = CallOrFail<v1::ListQuotasResponse>(
        ls_flags->server, [](auto& stub, grpc::ClientContext& ctx, auto* out) {
          return stub.ListQuotas(&ctx, v1::ListQuotasRequest(), out);
        });
    if (ls_flags->json) return PrintJsonArray(resp.teams(), QuotaJson);
    std::vector<std::vector<std::string>> rows{
        {"TEAM", "GUARANTEED", "GPU MEM", "BORROW", "MAX PRIORITY", "USED", "BORROWED",
         "RUNNING", "PENDING"}};
    for (const v1::TeamQuotaStatus& t : resp.teams()) {
      rows.push_back({t.quota().team(),
                      t.quota_set() ? std::to_string(t.quota().guaranteed_gpus()) : "-",
                      t.quota().guaranteed_gpu_mem_mib() > 0
                          ? FormatSizeMiB(t.quota().guaranteed_gpu_mem_mib())
                          : "-",
                      BorrowText(t.quota().borrow_gpus()), GrantText(t),
                      std::to_string(t.used_gpus()),
                      std::to_string(t.borrowed_gpus()), std::to_string(t.running()),
                      std::to_string(t.pending())});
    }
    PrintTable(std::cout, rows);
  });
}

// `quota rm TEAM` (issue 41).
void RegisterQuotaRm(CLI::App& quota) {
  auto flags = std::make_shared<ClientFlags>();
  auto team = std::make_shared<std::string>();
  CLI::App* rm = quota.add_subcommand(
      "rm", "Remove a team's quota: no guarantee, unlimited borrowing (its grant goes too)");
  AddClientFlags(rm, *flags);
  rm->add_option("TEAM", *team, "Team name")->required();
  rm->callback([flags, team] {
    v1::RemoveQuotaRequest req;
    req.set_team(*team);
    CallOrFail<v1::RemoveQuotaResponse>(
        flags->server, [&req](auto& stub, grpc::ClientContext& ctx, auto* out) {
          return stub.RemoveQuota(&ctx, req, out);
        });
    if (flags->json) {
      std::cout << nlohmann::json{{"team", *team}, {"removed", true}}.dump() << "\n";
    } else {
      std::cout << "quota of team " << *team << " removed\n";
    }
  });
}

// `quota set`, `quota ls` and `quota rm`.
void RegisterQuota(CLI::App& app) {
  CLI::App* quota = app.add_subcommand("quota", "Team GPU quotas with borrowing (admin)");
  quota->require_subcommand(1);
  RegisterQuotaSet(*quota);
  RegisterQuotaLs(*quota);
  RegisterQuotaRm(*quota);
}

struct AcctFlags {
  std::string user, team, since = "30d", until, by = "user";
};

// The window and filters of `acct`; --since and --until relative to now.
v1::AccountingRequest AccountingRequestFrom(const AcctFlags& f) {
  const int64_t now = WallNowMs();
  v1::AccountingRequest req;
  req.set_user(f.user);
  req.set_team(f.team);
  if (f.by != "user" && f.by != "failure") {
    Fail(InvalidArgument("--by: \"" + f.by + "\" is not user or failure"));
  }
  req.set_by_failure(f.by == "failure");
  req.set_since_ms(OrFail(ParseTimePointMs(f.since, "--since", now)));
  req.set_until_ms(f.until.empty() ? now : OrFail(ParseTimePointMs(f.until, "--until", now)));
  if (req.since_ms() >= req.until_ms()) {
    Fail(InvalidArgument("--since: \"" + f.since + "\" is not before --until (\"" +
                         (f.until.empty() ? std::string("now") : f.until) + "\")"));
  }
  return req;
}

nlohmann::json AccountingRowJson(const v1::AccountingRow& r) {
  nlohmann::json j = {{"team", r.team()},
                      {"gpu_hours", r.gpu_hours()},
                      {"gpu_mem_gib_hours", r.gpu_mem_gib_hours()},
                      {"tasks", r.tasks()}};
  if (!r.user().empty()) j["user"] = r.user();
  if (!r.failure().empty()) {  // a `--by failure` row: the kind, not a team's
    j.erase("team");
    j["failure"] = r.failure();
  }
  return j;
}

std::string HoursText(double h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", h);
  return std::string(buf);
}

void PrintAccounting(const v1::AccountingResponse& resp, bool json, bool by_failure) {
  if (json) {
    nlohmann::json users = nlohmann::json::array(), teams = nlohmann::json::array();
    for (const v1::AccountingRow& r : resp.users()) users.push_back(AccountingRowJson(r));
    for (const v1::AccountingRow& r : resp.teams()) teams.push_back(AccountingRowJson(r));
    nlohmann::json out{{"since_ms", resp.since_ms()},
                       {"until_ms", resp.until_ms()},
                       {"users", users},
                       {"teams", teams}};
    if (by_failure) {
      nlohmann::json failures = nlohmann::json::array();
      for (const v1::AccountingRow& r : resp.failures()) failures.push_back(AccountingRowJson(r));
      out["failures"] = failures;
    }
    std::cout << out.dump() << "\n";
    return;
  }
  if (by_failure) {  // the kinds only
    std::vector<std::vector<std::string>> rows{
        {"FAILURE", "GPU-HOURS", "GPU-MEM GiB-HOURS", "TASKS"}};
    for (const v1::AccountingRow& r : resp.failures()) {
      rows.push_back({r.failure(), HoursText(r.gpu_hours()), HoursText(r.gpu_mem_gib_hours()),
                      std::to_string(r.tasks())});
    }
    return PrintTable(std::cout, rows);
  }
  std::vector<std::vector<std::string>> rows{
      {"TEAM", "USER", "GPU-HOURS", "GPU-MEM GiB-HOURS", "TASKS"}};
  for (const v1::AccountingRow& r : resp.users()) {
    rows.push_back({r.team(), r.user(), HoursText(r.gpu_hours()),
                    HoursText(r.gpu_mem_gib_hours()), std::to_string(r.tasks())});
  }
  for (const v1::AccountingRow& r : resp.teams()) {
    rows.push_back({r.team(), "(all)", HoursText(r.gpu_hours()),
                    HoursText(r.gpu_mem_gib_hours()), std::to_string(r.tasks())});
  }
  PrintTable(std::cout, rows);
}

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
  cmd->add_option("--by", f->by,
                  "user: per team and user (the default); failure: per way tasks ended "
                  "(exit, timeout, out_of_memory, ...; none = succeeded or not ended)");
  cmd->callback([flags, f] {
    const v1::AccountingRequest req = AccountingRequestFrom(*f);
    Client c(flags->server);
    v1::AccountingResponse resp;
    Status s =
        c.Call([&](grpc::ClientContext& ctx) { return c.stub().GetAccounting(&ctx, req, &resp); });
    if (!s.ok()) Fail(s);
    PrintAccounting(resp, flags->json, req.by_failure());
  });
}

nlohmann::json LearnedProfileJson(const v1::LearnedProfile& p) {
  nlohmann::json peaks = nlohmann::json::array();
  for (int64_t m : p.recent_peaks_mib()) peaks.push_back(m);
  return {{"key", p.key()},         {"task_type", p.task_type()},
          {"model", p.model()},     {"batch", p.batch()},
          {"height", p.height()},   {"width", p.width()},
          {"recent_peaks_mib", peaks}, {"observations", p.observations()},
          {"estimate_mib", p.estimate_mib()}};
}

std::string PeaksText(const v1::LearnedProfile& p) {
  std::string out;
  for (int64_t m : p.recent_peaks_mib()) out += (out.empty() ? "" : " ") + std::to_string(m);
  return out;
}

// `gpusched profile ls [--json]`, `gpusched profile rm KEY`: the learned GPU-memory peaks.
void RegisterProfile(CLI::App& app) {
  CLI::App* profile = app.add_subcommand(
      "profile", "What the GPU-memory table learned per profile: list, forget (admin)");
  profile->require_subcommand(1);
  auto ls_flags = std::make_shared<ClientFlags>();
  CLI::App* ls = profile->add_subcommand("ls", "Learned profiles: kept peaks and estimate");
  AddClientFlags(ls, *ls_flags);
  ls->callback([ls_flags] {
    const auto resp = CallOrFail<v1::ListLearnedProfilesResponse>(
        ls_flags->server, [](auto& stub, grpc::ClientContext& ctx, auto* out) {
          return stub.ListLearnedProfiles(&ctx, v1::ListLearnedProfilesRequest(), out);
        });
    if (ls_flags->json) return PrintJsonArray(resp.profiles(), LearnedProfileJson);
    std::vector<std::vector<std::string>> rows{
        {"KEY", "ESTIMATE", "OBSERVATIONS", "RECENT PEAKS (MiB, oldest first)"}};
    for (const v1::LearnedProfile& p : resp.profiles()) {
      rows.push_back({p.key(), FormatSizeMiB(p.estimate_mib()),
                      std::to_string(p.observations()), PeaksText(p)});
    }
    PrintTable(std::cout, rows);
  });
  auto rm_flags = std::make_shared<ClientFlags>();
  auto key = std::make_shared<std::string>();
  CLI::App* rm = profile->add_subcommand(
      "rm", "Forget what was learned for a profile (its tasks get the table's value again)");
  AddClientFlags(rm, *rm_flags);
  rm->add_option("KEY", *key, "The profile, as `profile ls` prints it (e.g. resnet50,batch=32)")
      ->required();
  rm->callback([rm_flags, key] {
    v1::RemoveLearnedProfileRequest req;
    req.set_key(*key);
    const auto resp = CallOrFail<v1::RemoveLearnedProfileResponse>(
        rm_flags->server, [&](auto& stub, grpc::ClientContext& ctx, auto* out) {
          return stub.RemoveLearnedProfile(&ctx, req, out);
        });
    if (rm_flags->json) {
      std::cout << LearnedProfileJson(resp.removed()).dump() << "\n";
      return;
    }
    std::cout << "profile " << resp.removed().key() << ": forgot "
              << resp.removed().recent_peaks_mib_size() << " peaks; its tasks now get "
              << (resp.removed().estimate_mib() > 0 ? FormatSizeMiB(resp.removed().estimate_mib())
                                                    : std::string("no estimate (no row or formula)"))
              << "\n";
  });
}

}  // namespace

void RegisterQuotaCommands(CLI::App& app) {
  RegisterQuota(app);
  RegisterAcct(app);
  RegisterProfile(app);
}

}  // namespace gpusched::cli
