// `gpusched token create|ls|revoke`: the API's bearer tokens (admins only; server/tokens.h).
// `create` prints the token once, on stdout, as one line (or JSON with --json); the server
// keeps only its hash. `create --agent NAME` makes an agent token instead (issue 35): it
// authenticates agent NAME's link to a server with --auth token, and nothing else.

#include <iostream>

#include "base/clock.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/output.h"

namespace gpusched::cli {
namespace {

nlohmann::json TokenInfoJson(const v1::TokenInfo& t) {
  return {{"id", t.id()},
          {"user", t.user()},
          {"team", t.team()},
          {"admin", t.admin()},
          {"created_ms", t.created_ms()},
          {"agent_node", t.agent_node()}};
}


void RegisterCreate(CLI::App& token) {
  struct Flags {
    ClientFlags client;
    std::string user, team, agent;
    bool admin = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = token.add_subcommand(
      "create",
      "Create a token for a user (--user), or for a node's agent (--agent), and print it once "
      "(admins only)");
  AddClientFlags(cmd, f->client);
  auto* user = cmd->add_option("--user", f->user, "Whom the token names (tasks record this user)");
  cmd->add_option("--agent", f->agent,
                  "An agent token instead: it lets the agent of node NAME (and no other) "
                  "connect to a server with --auth token without TLS (`gpusched agent "
                  "--name NAME --token-file F`); it calls no API")
      ->excludes(user);
  cmd->add_option("--team", f->team, "The user's team (default: default)");
  cmd->add_flag("--admin", f->admin, "May cordon, drain, manage tokens and act on every task");
  cmd->callback([f] {
    if (f->user.empty() && f->agent.empty()) {
      Fail(InvalidArgument("--user: missing; give --user NAME (or --agent NODE for an agent's "
                           "token)"));
    }
    if (!f->agent.empty() && (!f->team.empty() || f->admin)) {
      Fail(InvalidArgument("--agent: an agent token has no --team or --admin"));
    }
    Client c(f->client.server);
    v1::CreateTokenRequest req;
    req.set_user(f->user);
    req.set_team(f->team);
    req.set_admin(f->admin);
    req.set_agent_node(f->agent);
    v1::CreateTokenResponse resp;
    // Call may send it again after a try that went unanswered: a token created by a lost try
    // is held by nobody (harmless; `token ls` shows it, `token revoke` removes it).
    Status s = c.Call(
        [&](grpc::ClientContext& ctx) { return c.stub().CreateToken(&ctx, req, &resp); });
    if (!s.ok()) Fail(s);
    if (f->client.json) {
      nlohmann::json j = TokenInfoJson(resp.info());
      j.erase("created_ms");
      j["token"] = resp.token();
      std::cout << j.dump() << "\n";
      return;
    }
    std::cout << resp.token() << "\n";
    if (!resp.info().agent_node().empty()) {
      std::cerr << "agent token " << resp.info().id() << " for node " << resp.info().agent_node()
                << ": shown once; start that node's agent with --token-file FILE (a file only "
                   "the agent's user can read) or GPUSCHED_TOKEN\n";
      return;
    }
    std::cerr << "token " << resp.info().id() << " for " << resp.info().user() << " (team "
              << resp.info().team() << (resp.info().admin() ? ", admin" : "")
              << "): shown once; give it to the user for GPUSCHED_TOKEN or "
                 "~/.config/gpusched/token\n";
  });
}

void RegisterList(CLI::App& token) {
  auto flags = std::make_shared<ClientFlags>();
  CLI::App* cmd = token.add_subcommand("ls", "List tokens, never their secrets (admins only)");
  AddClientFlags(cmd, *flags);
  cmd->callback([flags] {
    Client c(flags->server);
    v1::ListTokensRequest req;
    v1::ListTokensResponse resp;
    Status s = c.Call(
        [&](grpc::ClientContext& ctx) { return c.stub().ListTokens(&ctx, req, &resp); });
    if (!s.ok()) Fail(s);
    if (flags->json) {
      nlohmann::json a = nlohmann::json::array();
      for (const v1::TokenInfo& t : resp.tokens()) a.push_back(TokenInfoJson(t));
      std::cout << a.dump() << "\n";
      return;
    }
    const int64_t now = RealClock().NowMs();
    std::vector<std::vector<std::string>> rows{{"ID", "USER", "TEAM", "ADMIN", "CREATED"}};
    for (const v1::TokenInfo& t : resp.tokens()) {
      rows.push_back({t.id(), t.user(), t.team(), t.admin() ? "yes" : "no",
                      Age(t.created_ms(), now)});
    }
    PrintTable(std::cout, rows);
  });
}

void RegisterRevoke(CLI::App& token) {
  auto flags = std::make_shared<ClientFlags>();
  auto id = std::make_shared<std::string>();
  CLI::App* cmd =
      token.add_subcommand("revoke", "Revoke a token: refused at once (admins only)");
  AddClientFlags(cmd, *flags);
  cmd->add_option("ID", *id, "Token id (see `gpusched token ls`)")->required();
  cmd->callback([flags, id] {
    Client c(flags->server);
    v1::RevokeTokenRequest req;
    req.set_id(*id);
    v1::RevokeTokenResponse resp;
    Status s = c.Call(
        [&](grpc::ClientContext& ctx) { return c.stub().RevokeToken(&ctx, req, &resp); });
    if (!s.ok()) Fail(s);
    if (flags->json) {
      std::cout << TokenInfoJson(resp.info()).dump() << "\n";
    } else {
      std::cout << "token " << resp.info().id() << " (" << resp.info().user() << ") revoked\n";
    }
  });
}

}  // namespace

void RegisterTokenCommands(CLI::App& app) {
  CLI::App* token = app.add_subcommand(
      "token", "Create, list and revoke API tokens of users and agents (admins)");
  token->require_subcommand(1);
  RegisterCreate(*token);
  RegisterList(*token);
  RegisterRevoke(*token);
}

}  // namespace gpusched::cli
