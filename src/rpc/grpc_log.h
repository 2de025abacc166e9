#pragma once
// gRPC's own log lines, in gpusched's words.
//
// gRPC writes its errors to stderr in a format of its own: a glog-style prefix (severity,
// date, thread, file:line) and, for a failed operation, its status tree with every node's
// source file and time ("UNKNOWN:No address added ... {file:..., children:[UNKNOWN:Unable
// to configure socket {..., children:[UNKNOWN:Address already in use {..., errno:98, ...}]}]}").
// A user meets them in front of gpusched's own message about the same failure.
//
// InstallGrpcLogSink routes them through SummarizeGrpcMessage and the daemons' logger
// (base/log.h, component "grpc"): one line, "gRPC: <what failed>: <why> (error at
// <file>:<line>)", repeats counted rather than written. GrpcLogCapture keeps what gRPC logs on the calling
// thread instead, for a caller that reports the failure itself and wants gRPC's reason in its
// message (a port in use, no permission for a low port, an address not on this machine).
//
// Thread-safety: InstallGrpcLogSink may be called from any thread (the first call installs;
// the sink itself is safe from every thread gRPC logs on). A GrpcLogCapture belongs to the
// thread that made it.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/log.h"

namespace gpusched::rpc {

// How the sink writes what gRPC logs outside a capture.
enum class GrpcLogMode {
  // One line each; a line the same as one written in the last minute (from the same place
  // in gRPC) is counted instead, and the count said with the next one written: a client
  // that fails its TLS handshake every second is one line a minute, not sixty.
  kDaemon,
  // Nothing but gRPC's own assertion failures (it aborts next): a short-lived client reports
  // every failure itself, from the call's status (gRPC's line about the same handshake came
  // before ours). Captures still keep lines.
  kClient,
};

// Installs the sink (the first call wins). gRPC still decides what is logged
// (GRPC_VERBOSITY, ERROR by default); GPUSCHED_GRPC_LOG=raw keeps gRPC's own format, for a
// bug report (main.cc).
void InstallGrpcLogSink(GrpcLogMode mode = GrpcLogMode::kDaemon);

// kDaemon's repeat counting is the logger's (logging::RepeatedLines, base/log.h): the same
// line from the same place in gRPC is written once a minute with the count held back.

// gRPC's message shortened to what a user reads: the description of every node of its
// status tree, outermost first, without the status code prefix ("UNKNOWN:") or the
// attributes (file, line, time, fd), repeated texts once. A message that is not such a tree
// (or one nested deeper than 16 levels) comes back as its first line, trimmed. Never more
// than 512 bytes. Total: any bytes in, never fails.
std::string SummarizeGrpcMessage(std::string_view message);

// While alive, what gRPC logs on this thread (through the sink) is kept here instead of
// printed. Captures nest: the innermost one keeps the lines.
class GrpcLogCapture {
 public:
  GrpcLogCapture();
  ~GrpcLogCapture();
  GrpcLogCapture(const GrpcLogCapture&) = delete;
  GrpcLogCapture& operator=(const GrpcLogCapture&) = delete;

  // The summaries of the lines captured so far, in order.
  std::vector<std::string> lines() const;

  // Writes what was captured as the sink would have, then forgets it: for a caller whose
  // operation succeeded after all and has nothing of its own to say.
  void Replay();

  // The sink's: one line, with where gRPC logged it.
  void Add(std::string summary, std::string where);

 private:
  struct Line {
    std::string summary, where;
  };

  friend std::string ListenFailureReason(const GrpcLogCapture& capture);

  GrpcLogCapture* outer_;
  std::vector<Line> lines_;
};

// The reason a listen failed, for "cannot listen on ADDR: REASON": the innermost cause of
// the last line captured (gRPC's tree goes from "No address added out of total 1 resolved
// for '...'" through "Unable to configure socket" down to the system's error), starting
// lower-case as our messages do: "address already in use", "cannot assign requested
// address", "permission denied". "address already in use" when nothing was captured.
std::string ListenFailureReason(const GrpcLogCapture& capture);

}  // namespace gpusched::rpc
