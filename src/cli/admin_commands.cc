// `gpusched admin backup FILE` and `gpusched admin restore FILE --data-dir DIR` (issue 39):
// a consistent snapshot of a running server's SQLite store, and a store made from one for a
// server to start on.
//
// backup: the server snapshots its store (SQLite's backup API under the store's lock, so every
// task acknowledged before the call is in it) and streams it; the CLI writes FILE.partial,
// opens it as a store to check it and count what it holds, syncs it and renames it to FILE.
// restore: offline, as the user the server runs as (DIR must be that user's private directory,
// as the server requires: `sudo -u gpusched gpusched admin restore ...` for the package). It
// never overwrites a store: DIR/state.db must not exist. The copy is checked the same way,
// synced and renamed into place.

#include <fcntl.h>
#include <sys/stat.h>  // chmod, fchmod
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/private_dir.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/usage_errors.h"
#include "store/sqlite_store.h"

namespace gpusched::cli {
namespace {

namespace fs = std::filesystem;

// What a snapshot holds, read through the store it is: "12 tasks (3 pending, 9 succeeded),
// 2 nodes". Fails when `path` is not a gpusched store.
StatusOr<std::string> Describe(const std::string& path, int64_t* tasks) {
  store::SqliteStore::Options options;
  options.lock_wait_ms = 0;
  GS_ASSIGN_OR_RETURN(std::unique_ptr<store::SqliteStore> s,
                      store::SqliteStore::Open(path, options));
  GS_ASSIGN_OR_RETURN(auto counts, s->CountTasksByState());
  GS_ASSIGN_OR_RETURN(auto nodes, s->LoadNodes());
  *tasks = 0;
  std::string by_state;
  for (const auto& [state, n] : counts) {
    *tasks += n;
    by_state += (by_state.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  }
  return std::to_string(*tasks) + " tasks" + (by_state.empty() ? "" : " (" + by_state + ")") +
         ", " + std::to_string(nodes.size()) + " nodes";
}

// fsync of a file or a directory; errors name the path.
Status SyncPath(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || fsync(fd) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) close(fd);
    return Unavailable("cannot sync " + path + ": " + why);
  }
  close(fd);
  return Status::Ok();
}

std::string ParentOf(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

void Backup(const ClientFlags& flags, const std::string& file) {
  const std::string partial = file + ".partial";
  Client client(flags.server);
  int64_t bytes = 0;
  Status s = client.Call(
      [&](grpc::ClientContext& ctx) {
        // The snapshot holds every task's environment and the tokens' hashes: the caller's
        // alone (0600) before a byte is written, whatever the umask.
        const int fd = open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || fchmod(fd, 0600) != 0) {
          if (fd >= 0) close(fd);
          return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "");
        }
        close(fd);
        std::ofstream out(partial, std::ios::binary | std::ios::trunc);  // anew at each try
        if (!out) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "");
        bytes = 0;
        auto reader = client.stub().Backup(&ctx, v1::BackupRequest());
        v1::BackupChunk chunk;
        while (reader->Read(&chunk)) {
          out.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
          bytes += static_cast<int64_t>(chunk.data().size());
        }
        out.close();
        if (!out) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "");
        return reader->Finish();
      },
      /*deadline_s=*/600);
  if (!s.ok()) {
    std::remove(partial.c_str());
    if (s.message().empty()) Fail("admin backup: cannot write " + partial, kExitFailure);
    Fail(s);
  }
  int64_t tasks = 0;
  StatusOr<std::string> what = Describe(partial, &tasks);
  if (!what.ok()) {
    std::remove(partial.c_str());
    Fail("admin backup: the snapshot received is not a readable store: " +
             what.status().message(),
         kExitFailure);
  }
  if (Status synced = SyncPath(partial); !synced.ok()) Fail(synced);
  std::error_code ec;
  fs::rename(partial, file, ec);
  if (ec) Fail("admin backup: cannot rename " + partial + " to " + file + ": " + ec.message(), 1);
  (void)SyncPath(ParentOf(file));
  if (flags.json) {
    std::cout << nlohmann::json{{"file", file}, {"bytes", bytes}, {"tasks", tasks}}.dump()
              << "\n";
  } else {
    std::cout << "backup: " << file << " (" << bytes << " bytes): " << *what << "\n";
  }
}

void Restore(const std::string& file, const std::string& dir) {
  const std::string target = dir + "/state.db";
  std::error_code ec;
  if (!fs::exists(file, ec)) Fail("admin restore: " + file + " does not exist", kExitUsage);
  if (fs::exists(target, ec)) {
    Fail("admin restore: " + target + " exists; a restore never overwrites a store (stop its "
         "server and move the data directory away first)", kExitFailure);
  }
  if (Status made = EnsurePrivateDir(dir, "--data-dir"); !made.ok()) Fail(made);
  const std::string partial = target + ".partial";
  fs::copy_file(file, partial, fs::copy_options::overwrite_existing, ec);
  if (ec) Fail("admin restore: cannot copy " + file + " to " + partial + ": " + ec.message(), 1);
  int64_t tasks = 0;
  StatusOr<std::string> what = Describe(partial, &tasks);  // also brings old schemas up
  if (!what.ok()) {
    fs::remove(partial, ec);
    Fail("admin restore: " + file + " is not a gpusched store: " + what.status().message(),
         kExitFailure);
  }
  chmod(partial.c_str(), 0600);
  if (Status synced = SyncPath(partial); !synced.ok()) Fail(synced);
  fs::rename(partial, target, ec);
  if (ec) Fail("admin restore: cannot rename " + partial + ": " + ec.message(), kExitFailure);
  (void)SyncPath(dir);
  std::cout << "restored " << *what << " into " << target
            << "; start the server with --data-dir " << dir << "\n";
}

// Issue 39: the server reads its --config again (as on SIGHUP) and says what it applied.
void Reload(const ClientFlags& flags) {
  Client client(flags.server);
  v1::ReloadConfigResponse resp;
  Status s = client.Call([&](grpc::ClientContext& ctx) {
    return client.stub().ReloadConfig(&ctx, v1::ReloadConfigRequest(), &resp);
  });
  if (!s.ok()) Fail(s);
  const std::vector<std::string> applied(resp.applied().begin(), resp.applied().end());
  const std::vector<std::string> restart(resp.needs_restart().begin(), resp.needs_restart().end());
  if (flags.json) {
    std::cout << nlohmann::json{{"file", resp.file()}, {"applied", applied},
                                {"needs_restart", restart}}.dump()
              << "\n";
    return;
  }
  const auto list = [](const std::vector<std::string>& keys) {
    std::string out;
    for (const std::string& k : keys) out += (out.empty() ? "" : ", ") + k;
    return out.empty() ? std::string("none") : out;
  };
  std::cout << "reloaded " << resp.file() << "\napplied: " << list(applied)
            << "\nneeds a restart: " << list(restart) << "\n";
}

}  // namespace

void RegisterAdminCommands(CLI::App& app) {
  CLI::App* admin = app.add_subcommand(
      "admin", "Backup and restore of the server's store; reload its config");
  admin->require_subcommand(1);
  auto flags = std::make_shared<ClientFlags>();
  auto file = std::make_shared<std::string>();
  CLI::App* backup = admin->add_subcommand(
      "backup", "A consistent snapshot of the running server's store into FILE (admin)");
  AddClientFlags(backup, *flags);
  backup->add_option("FILE", *file, "Where to write the snapshot (a SQLite database)")
      ->required();
  backup->callback([flags, file] { Backup(*flags, *file); });

  auto reload_flags = std::make_shared<ClientFlags>();
  CLI::App* reload = admin->add_subcommand(
      "reload", "The server reads its --config again, applies what can change live and lists "
                "what needs a restart (admin; SIGHUP does the same)");
  AddClientFlags(reload, *reload_flags);
  reload->callback([reload_flags] { Reload(*reload_flags); });

  auto from = std::make_shared<std::string>();
  auto dir = std::make_shared<std::string>();
  CLI::App* restore = admin->add_subcommand(
      "restore", "Make DIR/state.db from a backup, for a server started with --data-dir DIR");
  restore->add_option("FILE", *from, "A file written by `admin backup`")->required();
  restore->add_option("--data-dir", *dir, "The new server's data directory")->required();
  restore->callback([from, dir] { Restore(*from, *dir); });
}

}  // namespace gpusched::cli
