#pragma once
// FakeCgroupOps: the cgroup seam (task_cgroup.h) in memory, for the paths this machine
// cannot run (cgroup v2 with controllers). Files are what was written last (or what the test
// put there); writes are also logged in order. Failures are injected per path.
//
// Thread-safety: all methods under one mutex.

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/task_cgroup.h"

namespace gpusched::agent::testing {

class FakeCgroupOps final : public CgroupOps {
 public:
  struct State {
    std::set<std::string> dirs;
    std::map<std::string, std::string> files;
    std::vector<std::pair<std::string, std::string>> writes;  // (path, text), in order
    std::map<std::string, int> fail_writes;  // path -> how many writes fail (EBUSY) first
    std::set<std::string> busy_dirs;         // rmdir fails (processes remain)
    std::map<std::string, std::vector<int>> device_filters;  // dir -> its allowed GPUs
    bool fail_device_filter = false;
    std::vector<pid_t> killed;
    std::vector<std::string> opened;
  };
  explicit FakeCgroupOps(std::shared_ptr<State> state) : s_(std::move(state)) {}

  Status MakeDir(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    s_->dirs.insert(path);
    return Status::Ok();
  }
  Status RemoveDir(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (s_->busy_dirs.count(path)) return FailedPrecondition("cannot remove " + path + ": busy");
    s_->dirs.erase(path);
    return Status::Ok();
  }
  Status Write(const std::string& path, std::string_view text) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = s_->fail_writes.find(path); it != s_->fail_writes.end() && it->second > 0) {
      --it->second;
      return FailedPrecondition("cannot write to " + path + ": Device or resource busy");
    }
    s_->writes.emplace_back(path, std::string(text));
    s_->files[path] = std::string(text);
    return Status::Ok();
  }
  StatusOr<std::string> Read(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = s_->files.find(path);
    if (it == s_->files.end()) return NotFound("cannot open " + path);
    return it->second;
  }
  bool Exists(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    return s_->files.count(path) > 0 || s_->dirs.count(path) > 0;
  }
  int OpenForWrite(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    s_->opened.push_back(path);
    return open("/dev/null", O_WRONLY | O_CLOEXEC);  // joining it changes nothing
  }
  Status AttachGpuDeviceFilter(const std::string& dir,
                               const std::vector<int>& allowed_gpus) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (s_->fail_device_filter) return FailedPrecondition("bpf: Operation not permitted");
    s_->device_filters[dir] = allowed_gpus;
    return Status::Ok();
  }
  void Kill(pid_t pid, int) override {
    std::lock_guard<std::mutex> lock(mu_);
    s_->killed.push_back(pid);
  }
  void SleepMs(int) override {}

 private:
  std::mutex mu_;
  std::shared_ptr<State> s_;
};

}  // namespace gpusched::agent::testing
