// Bearer tokens (tokens.h), who may do what (access.h), the auth switch (server_config.h) and
// the control plane's tokens: persisted through the commit pipeline, restored, revoked at once.

#include "server/tokens.h"

#include <gtest/gtest.h>

#include "base/clock.h"
#include "base/testing/test_dir.h"
#include "server/access.h"
#include "server/control_plane.h"
#include "server/server_config.h"
#include "store/memory_store.h"
#include "store/record_codec.h"
#include "store/sqlite_store.h"
#include "store/testing/faulty_store.h"

namespace gpusched::server {
namespace {

TEST(TokensTest, MintedTokenHasTheDocumentedFormatAndOnlyItsHashIsInTheRecord) {
  auto m = MintToken("alice", "", false, 1234);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->token.size(), 4u + 16 + 1 + 64);
  EXPECT_EQ(m->token.substr(0, 4), "gst_");
  auto parts = ParseToken(m->token);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->id, m->record.id);
  EXPECT_EQ(m->record.user, "alice");
  EXPECT_EQ(m->record.team, "default");
  EXPECT_EQ(m->record.created_ms, 1234);
  EXPECT_EQ(m->record.secret_sha256, Sha256Hex(parts->secret));
  EXPECT_EQ(store::EncodeToken(m->record).find(parts->secret), std::string::npos);
  auto other = MintToken("alice", "", false, 1234);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->token, m->token);  // random, not derived from the user
}

TEST(TokensTest, Sha256MatchesTheStandardTestVector) {
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(TokensTest, BearerHeaderParsing) {
  EXPECT_EQ(*ParseBearer("Bearer abc"), "abc");
  EXPECT_EQ(*ParseBearer("  bearer   abc  "), "abc");
  EXPECT_EQ(ParseBearer("Basic abc").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(ParseBearer("Bearer").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(ParseBearer("Bearer    ").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(ParseBearer("").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(ParseBearer("Bearerabc").status().code(), StatusCode::kUnauthenticated);
}

TEST(TokensTest, MalformedTokensAreUnauthenticatedAndNotEchoed) {
  for (const std::string& bad : std::vector<std::string>{
           "", "gst_", "abc", "gst_0123456789abcdef_" + std::string(63, 'a'),
        "gst_0123456789ABCDEF_" + std::string(64, 'a'),
        "gst_0123456789abcdef-" + std::string(64, 'a'),
        "xst_0123456789abcdef_" + std::string(64, 'a')}) {
    auto p = ParseToken(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), StatusCode::kUnauthenticated);
    if (bad.size() > 8) {
      EXPECT_EQ(p.status().message().find(bad), std::string::npos);
    }
  }
}

TEST(TokensTest, TableAcceptsTheTokenAndRefusesAWrongSecretAnUnknownIdAndARemovedOne) {
  TokenTable table;
  auto m = MintToken("bob", "ml", true, 1);
  ASSERT_TRUE(m.ok());
  table.Put(m->record);
  auto caller = table.Authenticate(m->token);
  ASSERT_TRUE(caller.ok()) << caller.status().ToString();
  EXPECT_EQ(caller->user, "bob");
  EXPECT_EQ(caller->team, "ml");
  EXPECT_TRUE(caller->admin);
  std::string wrong = m->token;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  EXPECT_EQ(table.Authenticate(wrong).status().code(), StatusCode::kUnauthenticated);
  auto unknown = MintToken("bob", "ml", true, 1);
  EXPECT_EQ(table.Authenticate(unknown->token).status().code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(table.Remove(m->record.id));
  EXPECT_EQ(table.Authenticate(m->token).status().code(), StatusCode::kUnauthenticated);
  EXPECT_FALSE(table.Remove(m->record.id));
}

TEST(TokensTest, UserAndTeamNamesAreCheckedAndTheErrorNamesFieldAndValue) {
  auto bad = MintToken("a b", "", false, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("user: \"a b\""), std::string::npos);
  EXPECT_FALSE(MintToken("", "", false, 1).ok());
  EXPECT_FALSE(MintToken("-x", "", false, 1).ok());
  auto team = MintToken("alice", "ml/x", false, 1);
  ASSERT_FALSE(team.ok());
  EXPECT_NE(team.status().message().find("team: \"ml/x\""), std::string::npos);
  EXPECT_TRUE(MintToken("alice.b@corp-1_x", "ml", false, 1).ok());
}

v1::Task TaskOf(const std::string& user) {
  v1::Task t;
  t.set_id(7);
  t.mutable_spec()->set_user(user);
  return t;
}

TEST(AccessTest, OwnerAndAdminMayActOnATaskOthersAreDeniedNamingTheAction) {
  const Caller alice{"alice", "ml", false, "a"}, bob{"bob", "ml", false, "b"},
      root{"ops", "default", true, "c"};
  EXPECT_TRUE(RequireOwnerOrAdmin(alice, TaskOf("alice"), "cancel task 7").ok());
  EXPECT_TRUE(RequireOwnerOrAdmin(root, TaskOf("alice"), "cancel task 7").ok());
  Status denied = RequireOwnerOrAdmin(bob, TaskOf("alice"), "cancel task 7");
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(denied.message().find("bob may not cancel task 7"), std::string::npos);
  EXPECT_NE(denied.message().find("belongs to alice"), std::string::npos);
  // A task without a recorded owner is an admin's only, whatever the caller is called.
  EXPECT_FALSE(RequireOwnerOrAdmin(Caller{"", "default", false, ""}, TaskOf(""), "x").ok());
  EXPECT_TRUE(RequireAdmin(root, "drain node n1").ok());
  Status drain = RequireAdmin(bob, "drain node n1");
  EXPECT_EQ(drain.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(drain.message().find("drain node n1 is for admins only"), std::string::npos);
}

TEST(AuthConfigTest, TokenAuthIsTheDefaultOffLoopbackAndCanBeForcedEitherWay) {
  ServerConfig c;
  for (const std::string loopback : {"127.0.0.1:7070", "127.1.2.3:1", "localhost:7070",
                                     "[::1]:7070"}) {
    c.listen = loopback;
    EXPECT_FALSE(c.AuthEnabled()) << loopback;
  }
  for (const std::string open : {"0.0.0.0:7070", "[::]:7070", "10.0.0.5:7070", ":7070"}) {
    c.listen = open;
    EXPECT_TRUE(c.AuthEnabled()) << open;
  }
  c.auth = "none";
  EXPECT_FALSE(c.AuthEnabled());
  c.listen = "127.0.0.1:7070";
  c.auth = "token";
  EXPECT_TRUE(c.AuthEnabled());
  c.auth = "tokens";
  Status s = c.Validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("auth: \"tokens\""), std::string::npos);
}

class ControlPlaneTokensTest : public ::testing::Test {
 protected:
  ControlPlaneTokensTest() { config_.auth = "token"; }
  std::unique_ptr<store::StateStore> Sqlite() {
    auto s = store::SqliteStore::Open((dir_.path() / "state.db").string(), {});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  std::unique_ptr<ControlPlane> Start(std::unique_ptr<store::StateStore> store) {
    auto cp = ControlPlane::Create(config_, clock_, std::move(store));
    EXPECT_TRUE(cp.ok()) << cp.status().ToString();
    return std::move(cp).value();
  }
  gpusched::testing::TestDir dir_{"gpusched_tokens"};
  ServerConfig config_;
  FakeClock clock_{1'000'000};
};

TEST_F(ControlPlaneTokensTest, CreatedTokenAuthenticatesSurvivesARestartAndRevokeIsImmediate) {
  std::string token, id;
  {
    auto cp = Start(Sqlite());
    auto m = cp->CreateToken("alice", "ml", false);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    token = m->token;
    id = m->record.id;
    auto caller = cp->Authenticate("Bearer " + token, "mallory");
    ASSERT_TRUE(caller.ok()) << caller.status().ToString();
    EXPECT_EQ(caller->user, "alice");  // the token says who calls, not the client
    EXPECT_EQ(caller->team, "ml");
    EXPECT_FALSE(caller->admin);
  }
  auto cp = Start(Sqlite());  // a restart: tokens come back from the store
  ASSERT_EQ(cp->ListTokens().size(), 1u);
  EXPECT_EQ(cp->ListTokens()[0].created_ms, 1'000'000);
  ASSERT_TRUE(cp->Authenticate("Bearer " + token, "").ok());
  auto revoked = cp->RevokeToken(id);
  ASSERT_TRUE(revoked.ok()) << revoked.status().ToString();
  EXPECT_EQ(revoked->user, "alice");
  EXPECT_EQ(cp->Authenticate("Bearer " + token, "").status().code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(cp->RevokeToken(id).status().code(), StatusCode::kNotFound);
  cp.reset();
  EXPECT_TRUE(Start(Sqlite())->ListTokens().empty());  // the revocation was stored
}

TEST_F(ControlPlaneTokensTest, NoTokenOrAWrongOneIsUnauthenticatedWithAuthOn) {
  auto cp = Start(std::make_unique<store::MemoryStore>());
  EXPECT_EQ(cp->Authenticate("", "alice").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(cp->Authenticate("Bearer nope", "").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(cp->Authenticate("Basic YWxpY2U6eA==", "").status().code(),
            StatusCode::kUnauthenticated);
}

// Issue 35: with authentication off the caller is the account its connection proves (the
// caller of Authenticate passes it), else the unprivileged default_user; never a claim.
TEST_F(ControlPlaneTokensTest, Issue35_WithAuthOffEveryoneIsAnAdminNamedByTheProvenAccount) {
  config_.auth = "none";
  auto cp = Start(std::make_unique<store::MemoryStore>());
  auto c = cp->Authenticate("", "carol");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->user, "carol");
  EXPECT_EQ(c->team, "default");
  EXPECT_TRUE(c->admin);
  EXPECT_EQ(cp->Authenticate("", "").value().user, "nobody");
  EXPECT_EQ(cp->Authenticate("", "bad name").value().user, "nobody");
}

TEST(AuthConfigTest, Issue35_DefaultUserIsNeverRoot) {
  ServerConfig c;
  EXPECT_EQ(c.default_user, "nobody");
  EXPECT_TRUE(c.Validate().ok());
  c.default_user = "root";
  Status s = c.Validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("default_user: \"root\" is uid 0"), std::string::npos)
      << s.message();
  c.default_user = "a b";
  EXPECT_NE(c.Validate().message().find("default_user"), std::string::npos);
}

// Issue 35: an agent token registers its own node only, and calls no API.
TEST_F(ControlPlaneTokensTest, Issue35_AnAgentTokenRegistersItsNodeOnlyAndCallsNoApi) {
  auto cp = Start(Sqlite());
  auto a = cp->CreateAgentToken("n1");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->record.agent_node, "n1");
  EXPECT_TRUE(cp->AuthenticateAgent("Bearer " + a->token, "n1").ok());
  Status other = cp->AuthenticateAgent("Bearer " + a->token, "n2");
  EXPECT_EQ(other.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(other.message().find("bound to node \"n1\""), std::string::npos) << other.message();
  EXPECT_EQ(cp->Authenticate("Bearer " + a->token, "").status().code(),
            StatusCode::kUnauthenticated);
  auto user = cp->CreateToken("alice", "", false);
  ASSERT_TRUE(user.ok());
  EXPECT_EQ(cp->AuthenticateAgent("Bearer " + user->token, "n1").code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(cp->AuthenticateAgent("", "n1").code(), StatusCode::kUnauthenticated);
  EXPECT_NE(cp->AuthenticateAgent("", "n1").message().find("token create --agent n1"),
            std::string::npos);
  EXPECT_FALSE(cp->CreateAgentToken("../x").ok());
  cp.reset();
  auto again = Start(Sqlite());  // the binding is stored with the token
  EXPECT_TRUE(again->AuthenticateAgent("Bearer " + a->token, "n1").ok());
  EXPECT_FALSE(again->AuthenticateAgent("Bearer " + a->token, "n2").ok());
}

TEST_F(ControlPlaneTokensTest, ATokenWhoseCommitFailedIsNeitherGivenOutNorStoredLater) {
  auto faulty = std::make_unique<store::testing::FaultyStore>(Sqlite());
  store::testing::FaultyStore* faults = faulty.get();
  auto cp = Start(std::move(faulty));
  faults->FailNextCommits(1);
  auto m = cp->CreateToken("alice", "ml", false);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotStored);
  EXPECT_TRUE(cp->ListTokens().empty());
  cp->RunOnce();  // the pipeline's retry carries nothing of it
  cp.reset();
  EXPECT_TRUE(Start(Sqlite())->ListTokens().empty());
}

}  // namespace
}  // namespace gpusched::server
