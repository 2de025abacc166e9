// The real CgroupOps (task_cgroup.h): system calls on the cgroup file systems, and the cgroup
// v2 device program loaded and attached with bpf(2) directly (the uapi header only: no
// libbpf needed for a program of a dozen instructions).

#include <fcntl.h>
#include <linux/bpf.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/task_cgroup.h"

namespace gpusched::agent {
namespace {

constexpr int kNvidiaMajor = 195;
constexpr int kFirstNonGpuMinor = 254;  // nvidia-modeset (254), nvidiactl (255)

std::string Errno(const std::string& what, int err) { return what + ": " + std::strerror(err); }

bpf_insn Insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst & 0xf;
  i.src_reg = src & 0xf;
  i.off = off;
  i.imm = imm;
  return i;
}

// The BPF_PROG_TYPE_CGROUP_DEVICE program: 0 (deny) for char 195:M with M < 254 and M not
// one of `allowed`, 1 (allow) for everything else. Context: struct bpf_cgroup_dev_ctx
// { u32 access_type (access << 16 | type); u32 major; u32 minor; }.
std::vector<bpf_insn> GpuDeviceFilterProgram(const std::vector<int>& allowed) {
  const int n = static_cast<int>(allowed.size());
  const int deny = 7 + n, allow = deny + 2;
  auto to_allow = [&](int pc) { return static_cast<int16_t>(allow - (pc + 1)); };
  std::vector<bpf_insn> p;
  p.push_back(Insn(BPF_LDX | BPF_MEM | BPF_W, 2, 1, 0, 0));  // r2 = access_type
  p.push_back(Insn(BPF_ALU64 | BPF_AND | BPF_K, 2, 0, 0, 0xffff));
  p.push_back(Insn(BPF_JMP | BPF_JNE | BPF_K, 2, 0, to_allow(2), BPF_DEVCG_DEV_CHAR));
  p.push_back(Insn(BPF_LDX | BPF_MEM | BPF_W, 3, 1, 4, 0));  // r3 = major
  p.push_back(Insn(BPF_JMP | BPF_JNE | BPF_K, 3, 0, to_allow(4), kNvidiaMajor));
  p.push_back(Insn(BPF_LDX | BPF_MEM | BPF_W, 4, 1, 8, 0));  // r4 = minor
  p.push_back(Insn(BPF_JMP | BPF_JGE | BPF_K, 4, 0, to_allow(6), kFirstNonGpuMinor));
  for (int k = 0; k < n; ++k) {
    p.push_back(Insn(BPF_JMP | BPF_JEQ | BPF_K, 4, 0, to_allow(7 + k), allowed[k]));
  }
  p.push_back(Insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0));  // deny
  p.push_back(Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  p.push_back(Insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 1));  // allow
  p.push_back(Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  return p;
}

class RealCgroupOps final : public CgroupOps {
 public:
  Status MakeDir(const std::string& path) override {
    if (mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return Status::Ok();
    return FailedPrecondition(Errno("cannot create " + path, errno));
  }
  Status RemoveDir(const std::string& path) override {
    if (rmdir(path.c_str()) == 0 || errno == ENOENT) return Status::Ok();
    return FailedPrecondition(Errno("cannot remove " + path, errno));
  }
  Status Write(const std::string& path, std::string_view text) override {
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return FailedPrecondition(Errno("cannot open " + path, errno));
    const ssize_t n = write(fd, text.data(), text.size());
    const int err = errno;
    close(fd);
    if (n != static_cast<ssize_t>(text.size())) {
      return FailedPrecondition(Errno("cannot write \"" + std::string(text) + "\" to " + path,
                                      n < 0 ? err : EIO));
    }
    return Status::Ok();
  }
  StatusOr<std::string> Read(const std::string& path) override {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NotFound(Errno("cannot open " + path, errno));
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    close(fd);
    return out;
  }
  bool Exists(const std::string& path) override { return access(path.c_str(), F_OK) == 0; }
  int OpenForWrite(const std::string& path) override {
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    return fd >= 0 ? fd : -errno;
  }
  Status AttachGpuDeviceFilter(const std::string& dir,
                               const std::vector<int>& allowed_gpus) override;
  void Kill(pid_t pid, int sig) override { kill(pid, sig); }
  void SleepMs(int ms) override {
    timespec ts{ms / 1000, (ms % 1000) * 1'000'000L};
    nanosleep(&ts, nullptr);
  }
};

Status RealCgroupOps::AttachGpuDeviceFilter(const std::string& dir,
                                            const std::vector<int>& allowed_gpus) {
  const std::vector<bpf_insn> prog = GpuDeviceFilterProgram(allowed_gpus);
  static const char kLicense[] = "GPL";
  bpf_attr load{};
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insn_cnt = static_cast<uint32_t>(prog.size());
  load.insns = reinterpret_cast<uint64_t>(prog.data());
  load.license = reinterpret_cast<uint64_t>(kLicense);
  const int prog_fd = static_cast<int>(syscall(SYS_bpf, BPF_PROG_LOAD, &load, sizeof load));
  if (prog_fd < 0) return FailedPrecondition(Errno("device program: bpf(BPF_PROG_LOAD)", errno));
  const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    const int err = errno;
    close(prog_fd);
    return FailedPrecondition(Errno("cannot open " + dir, err));
  }
  bpf_attr attach{};
  attach.target_fd = static_cast<uint32_t>(dir_fd);
  attach.attach_bpf_fd = static_cast<uint32_t>(prog_fd);
  attach.attach_type = BPF_CGROUP_DEVICE;
  attach.attach_flags = BPF_F_ALLOW_MULTI;
  const long r = syscall(SYS_bpf, BPF_PROG_ATTACH, &attach, sizeof attach);
  const int err = errno;
  close(dir_fd);
  close(prog_fd);  // the attachment holds the program for as long as the cgroup lives
  if (r != 0) return FailedPrecondition(Errno("device program: cannot attach to " + dir, err));
  return Status::Ok();
}

}  // namespace

std::unique_ptr<CgroupOps> MakeRealCgroupOps() { return std::make_unique<RealCgroupOps>(); }

}  // namespace gpusched::agent
