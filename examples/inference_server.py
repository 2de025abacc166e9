#!/usr/bin/env python3
"""An HTTP inference server that spreads its requests over the GPUs of one machine with the
gpusched dispatcher (gpusched's C ABI, through the `gpusched` Python package): the gpusched
policy, or with --policy literal the CN113051059B real-time dispatcher.

Every request leases a GPU from the dispatcher (acquire), runs the model on that GPU and hands
the lease back with its outcome (release; a failed run trains nothing). The model is simulated
unless PyTorch with CUDA is present and asked for: a simulated GPU (SimDevices) copies the
request's input there and back (scaled by 2) and computes for `work * ms_per_unit` ms, shared
with whatever else runs on that GPU.

    GPUSCHED_C_LIB=build/src/dispatch/libgpusched_c.so.1 PYTHONPATH=python \\
        python3 examples/inference_server.py --gpus 3 --port 8080
    curl -s -XPOST localhost:8080/infer -d '{"service": "classify", "work": 2, "input": [1, 2]}'
    curl -s localhost:8080/metrics

Endpoints: POST /infer {"service": name (default: the first), "work": units >= 0 (default 1),
"input": list of numbers (optional)} -> {"gpu", "service", "output", "queue_ms", "run_ms",
"attempts", "locked"}; GET /metrics (JSON, see docs/inference-server.md); GET /healthz.
400 names the bad field, 503 means no GPU was granted within acquire_timeout_ms.
"""

import argparse
import json
import math
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gpusched import Dispatcher, GpuschedError, Service, SimDevices

_UNAVAILABLE = 6

# name -> (Service for the dispatcher, simulated ms per unit of work). cost_ms is the first
# guess of a request's run time; the dispatcher learns the real one (claim 6).
DEFAULT_SERVICES = {
    "classify": (Service("classify", cost_ms=10, wait_ms=5, try_ms=1), 8.0),
    "detect": (Service("detect", cost_ms=30, wait_ms=15, try_ms=2), 25.0),
}


class BadRequest(ValueError):
    pass


class SimulatedModel:
    """A model on simulated GPUs: the input goes to the GPU and back (times 2), and the GPU
    computes for work * ms_per_unit ms (processor-shared with co-running requests)."""

    name = "simulated"

    def __init__(self, gpus, ms_per_unit):
        self.devices = SimDevices(count=gpus, memory_mib=64, streams=16)
        self.ms_per_unit = ms_per_unit

    def run(self, gpu, service, work, values):
        output = self.devices.scale(gpu, values, 2.0) if values else []
        self.devices.compute(gpu, work * self.ms_per_unit[service])
        return output

    def close(self):
        self.devices.close()


class TorchModel:
    """A small linear layer per GPU with PyTorch on CUDA (used only when asked for and present):
    work sets the batch, the input is scaled by 2 on the GPU."""

    name = "torch"

    def __init__(self, gpus):
        import torch  # noqa: PLC0415 (optional dependency)
        if not torch.cuda.is_available() or torch.cuda.device_count() < gpus:
            raise RuntimeError(f"torch sees {torch.cuda.device_count()} CUDA device(s), "
                               f"{gpus} asked")
        self.torch = torch
        gen = torch.Generator().manual_seed(0)
        self.weights = [torch.randn(512, 512, generator=gen).to(f"cuda:{g}") for g in range(gpus)]

    def run(self, gpu, service, work, values):
        torch = self.torch
        device = f"cuda:{gpu}"
        batch = torch.ones(max(1, int(work * 64)), 512, device=device)
        (batch @ self.weights[gpu]).sum().item()  # the "inference"; .item() waits for it
        if not values:
            return []
        return (torch.tensor(values, dtype=torch.float32, device=device) * 2).tolist()

    def close(self):
        pass


def make_model(kind, gpus, ms_per_unit):
    if kind in ("torch", "auto"):
        try:
            return TorchModel(gpus)
        except Exception as e:  # noqa: BLE001 (no torch, no CUDA, too few GPUs)
            if kind == "torch":
                raise
            print(f"inference_server: simulated model ({e})", file=sys.stderr)
    return SimulatedModel(gpus, ms_per_unit)


def _finite_number(v):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an integer too large for a float
        return False


def parse_request(body, services):
    try:
        req = json.loads(body or b"{}")
    except ValueError as e:
        raise BadRequest(f"body: not JSON ({e})") from e
    if not isinstance(req, dict):
        raise BadRequest(f"body: must be a JSON object, got {type(req).__name__}")
    service = req.get("service", next(iter(services)))
    if not isinstance(service, str) or service not in services:
        raise BadRequest(f"service: must be one of {sorted(services)}, got {service!r}")
    work = req.get("work", 1)
    if not _finite_number(work) or not 0 <= work <= 1000:
        raise BadRequest(f"work: must be a number in [0, 1000], got {work!r}")
    values = req.get("input", [])
    if not isinstance(values, list) or len(values) > 65536 or \
            not all(_finite_number(v) for v in values):
        raise BadRequest("input: must be a list of at most 65536 finite numbers")
    return service, float(work), [float(v) for v in values]


class InferenceServer:
    """The server: a dispatcher over `gpus` GPUs, a model, and a threading HTTP server on
    (host, port); port 0 picks a free one (see .port). start() serves in a thread; close()
    stops accepting, waits for the requests in flight and frees the dispatcher."""

    def __init__(self, gpus=3, host="127.0.0.1", port=0, model="sim", services=None,
                 max_per_gpu=2, acquire_timeout_ms=5000, policy="gpusched"):
        services = services or DEFAULT_SERVICES
        self.gpus = gpus
        self.services = {name: svc for name, (svc, _) in services.items()}
        self.ms_per_unit = {n: ms for n, (_, ms) in services.items()}
        self.model = make_model(model, gpus, self.ms_per_unit)
        # max_per_gpu bounds the requests running on one GPU: several requests may share one
        # GPU under either policy (see docs/inference-server.md).
        self.dispatcher = Dispatcher(gpus=gpus, services=list(self.services.values()),
                                     policy=policy, max_per_gpu=max_per_gpu,
                                     acquire_timeout_ms=acquire_timeout_ms)
        self._lock = threading.Lock()
        self.served_per_gpu = [0] * gpus
        self.failed = 0
        self.refused = 0
        self._http = ThreadingHTTPServer((host, port), self._handler_class())
        self._http.daemon_threads = False  # request threads are joined by server_close
        self._http.block_on_close = True  # close() waits for the handlers in flight
        self.port = self._http.server_address[1]
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._http.serve_forever, name="http",
                                        daemon=True)
        self._thread.start()
        return self

    def serve_forever(self):
        self._http.serve_forever()

    def close(self):
        if self._thread is not None:
            self._http.shutdown()  # serve_forever returns; no new connections
            self._thread.join()
        self._release()

    def _release(self):
        self._http.server_close()  # joins the request threads still answering
        self.dispatcher.close()    # no lease is out any more
        self.model.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def infer(self, service, work, values):
        """Acquire a GPU, run the model on it, release with the outcome."""
        # The request says how much work it brings: its expected run time on an idle GPU,
        # which the gpusched policy places it by (the literal policy ignores it).
        lease = self.dispatcher.acquire(service, expected_ms=work * self.ms_per_unit[service])
        # GpuschedError 6: none granted in time
        started = time.monotonic()
        try:
            output = self.model.run(lease.gpu, service, work, values)
        except BaseException:
            self.dispatcher.release(lease, failed=True)
            with self._lock:
                self.failed += 1
            raise
        run_ms = (time.monotonic() - started) * 1000
        self.dispatcher.release(lease)
        with self._lock:
            self.served_per_gpu[lease.gpu] += 1
        return {"gpu": lease.gpu, "service": service, "output": output,
                "queue_ms": (lease.granted_ns - lease.requested_ns) / 1e6, "run_ms": run_ms,
                "attempts": lease.attempts, "locked": bool(lease.locked)}

    def metrics(self):
        with self._lock:
            served, failed, refused = list(self.served_per_gpu), self.failed, self.refused
        return {
            "model": self.model.name,
            "gpus": self.gpus,
            "served_per_gpu": served,
            "failed": failed,
            "refused": refused,
            "services": {n: self.dispatcher.service_metrics(n) for n in self.services},
            "gpu_metrics": [self.dispatcher.gpu_metrics(g) for g in range(self.gpus)],
        }

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _reply(self, code, obj):
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path == "/metrics":
                    self._reply(200, server.metrics())
                elif self.path == "/healthz":
                    self._reply(200, {"ok": True})
                else:
                    self._reply(404, {"error": f"path: no such endpoint {self.path!r}"})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != "/infer":
                    self._reply(404, {"error": f"path: no such endpoint {self.path!r}"})
                    return
                try:
                    self._reply(200, server.infer(*parse_request(body, server.services)))
                except BadRequest as e:
                    self._reply(400, {"error": str(e)})
                except GpuschedError as e:
                    if e.code == _UNAVAILABLE:
                        with server._lock:
                            server.refused += 1
                        self._reply(503, {"error": str(e)})
                    else:
                        self._reply(500, {"error": str(e)})
                except Exception as e:  # noqa: BLE001 (the model failed; lease released failed)
                    self._reply(500, {"error": f"model: {e}"})

            def log_message(self, *args):  # quiet; the metrics tell the story
                pass

        return Handler


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gpus", type=int, default=3)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--model", choices=["sim", "torch", "auto"], default="sim")
    p.add_argument("--max-per-gpu", type=int, default=2)
    p.add_argument("--acquire-timeout-ms", type=int, default=5000)
    p.add_argument("--policy", choices=["gpusched", "literal"], default="gpusched")
    args = p.parse_args(argv)
    server = InferenceServer(gpus=args.gpus, host=args.host, port=args.port, model=args.model,
                             max_per_gpu=args.max_per_gpu,
                             acquire_timeout_ms=args.acquire_timeout_ms, policy=args.policy)
    print(f"inference_server: {server.model.name} model on {args.gpus} GPU(s), "
          f"http://{args.host}:{server.port}", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
