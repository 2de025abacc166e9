#pragma once
// ClusterIdentity: which cluster the task files under an agent's data directory belong to
// (issue 39). A cluster is a store (base/cluster_id.h): a server started on a new store
// numbers its tasks from 1 again, so task 1's log and journal records on the node may be
// another cluster's task 1. The agent keeps the id of the cluster its files belong to in
// DATA_DIR/cluster_id; when the server it registers with names another cluster, the agent
// stops the old cluster's tasks and moves their files aside with ArchiveTaskFiles, into
// DATA_DIR/clusters/OLD_ID/{logs,journal}/, before it runs any task of the new one.
//
// A cluster_id file that does not hold an id is an error (Read), not "no id": it is written
// only by Record (a temp file renamed over it), so it is damaged or was edited, and the
// agent cannot tell whose tasks its files are. The message says to remove the file; the
// next registration then records the server's id and keeps the files as that cluster's.
//
// Thread-safety: no state of its own; calls on one data directory must not overlap (the
// agent's work thread makes them, after Start's Read).

#include <string>

#include "base/status.h"

namespace gpusched::agent {

class ClusterIdentity {
 public:
  explicit ClusterIdentity(std::string data_dir) : data_dir_(std::move(data_dir)) {}

  // The id recorded in DATA_DIR/cluster_id; "" when there is no such file. InvalidArgument
  // naming the file and its contents when they are not an id; Unavailable when it cannot
  // be read.
  StatusOr<std::string> Read() const;
  // Records `id` (validated first): written to a temp file, fsynced, renamed over
  // DATA_DIR/cluster_id, and the directory fsynced. A crash leaves the old id or the new one.
  Status Record(const std::string& id) const;
  // Moves every entry of DATA_DIR/logs and DATA_DIR/journal (not the journal's lock, which
  // the running agent holds) into DATA_DIR/clusters/OLD_ID/logs and .../journal, created
  // 0700. A name already taken there (the agent left that cluster before) gets a suffix
  // ".1", ".2", ...: nothing is overwritten. Returns how many entries were moved; the first
  // failure stops it, naming the path. REQUIRES: `old_id` is a valid id.
  StatusOr<int> ArchiveTaskFiles(const std::string& old_id) const;

  std::string path() const { return data_dir_ + "/cluster_id"; }

 private:
  // Moves the entries of DATA_DIR/`sub` into `to` (an existing directory).
  StatusOr<int> MoveEntries(const std::string& sub, const std::string& to) const;
  std::string data_dir_;
};

}  // namespace gpusched::agent
