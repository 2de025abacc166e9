#pragma once
// Closed-loop gRPC clients for the control-plane benchmarks (`bench e2e`, `bench scale`): many
// clients, each with one call in flight on a channel of its own, driven by one thread on one
// completion queue; and the transport's own limit, bare round trips to the same server.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "base/thread_name.h"
#include "cli/e2e_driver.h"
#include "rpc/tls.h"

namespace gpusched::cli {

// One client's call in flight. Declared in this order so that the reader (in the call's
// arena) is destroyed before the context that frees it.
template <typename Response>
struct ClientCall {
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> reader;
  Response response;
  grpc::Status status;
};

// `n` calls from closed-loop clients: each of `drivers` (a channel of its own) has one call
// in flight at a time and starts its next when the answer comes, as a client that waits for
// each answer would. One thread, named `name` so that its CPU can be told apart, drives them
// all on one completion queue: the clients' own cost, which the run's CPU time counts, stays
// small next to the server's. `start` begins one call of a client on the queue. Returns the
// calls that failed (not answered OK).
template <typename Response, typename Start>
int RunClosedLoopClients(std::vector<std::unique_ptr<E2eDriver>>& drivers, int n,
                         const char* name, Start start) {
  int failed = 0;
  std::thread driver([&] {
    NameThisThread(name);
    grpc::CompletionQueue cq;
    std::vector<ClientCall<Response>> calls(drivers.size());
    int started = 0, in_flight = 0;
    const auto next = [&](size_t c) {
      if (started == n) return;
      ++started;
      ++in_flight;
      ClientCall<Response>& call = calls[c];
      // The reader lives in its call's arena, which the context's end frees: it goes first.
      call.reader.reset();
      call.ctx = std::make_unique<grpc::ClientContext>();
      call.reader = start(*drivers[c], *call.ctx, cq);
      call.reader->Finish(&call.response, &call.status, reinterpret_cast<void*>(c));
    };
    for (size_t c = 0; c < drivers.size(); ++c) next(c);
    void* tag = nullptr;
    bool ok = false;
    while (in_flight > 0 && cq.Next(&tag, &ok)) {
      --in_flight;
      const auto c = reinterpret_cast<size_t>(tag);
      if (!ok || !calls[c].status.ok()) ++failed;
      next(c);
    }
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
  });
  driver.join();
  return failed;
}

// `clients` drivers of the server at `address`, each connected before it is returned.
std::vector<std::unique_ptr<E2eDriver>> Clients(int clients, const std::string& address,
                                                const rpc::ClientTls* tls,
                                                const std::string& token);

// `n` bare round trips (GetServerStatus: no scheduler state, no store) from as many
// closed-loop clients as a task run's, driven the same way: calls per second, the most this
// transport carries here. A task costs one such call (its submission) and four messages on
// its agent's stream (assign, started, finished, ack).
double RpcLimitPerSecond(const std::string& address, const rpc::ClientTls* tls,
                         const std::string& token, int clients, int n);

}  // namespace gpusched::cli
