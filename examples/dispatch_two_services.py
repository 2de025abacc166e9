#!/usr/bin/env python3
"""Spreads the requests of two inference services over 4 simulated GPUs with the CN113051059B
dispatcher, through the C ABI. Each service has its own worker threads (as in the patent);
every request leases a GPU, runs on it (a small copy/scale/copy round trip plus simulated
compute), and releases it. Prints per-service and per-GPU metrics.

    GPUSCHED_C_LIB=path/to/libgpusched_c.so.1 PYTHONPATH=python python3 examples/dispatch_two_services.py
"""

import json
import random
import sys
import threading

from gpusched import Dispatcher, Service, SimDevices

GPUS = 4
SERVICES = [Service("ocr", cost_ms=8, wait_ms=4, try_ms=1),
            Service("asr", cost_ms=20, wait_ms=10, try_ms=2)]


def worker(d, devices, service, requests, seed, per_gpu, errors):
    rng = random.Random(seed)
    mean = {"ocr": 6.0, "asr": 16.0}[service]
    for _ in range(requests):
        with d.lease(service) as gpu:
            out = devices.scale(gpu, [1.0, 2.0, 3.0], 2.0)
            if out != [2.0, 4.0, 6.0]:
                errors.append(f"{service} on gpu {gpu}: {out}")
            devices.compute(gpu, rng.expovariate(1.0 / mean))
            per_gpu[gpu] += 1  # under the GIL; good enough for a tally


def main(requests_per_worker=15, workers_per_service=3):
    per_gpu = [0] * GPUS
    errors = []
    # max_per_gpu bounds the requests running on one GPU at once: the per-GPU lock of
    # CN113051059B is an ownership token, not mutual exclusion.
    with SimDevices(count=GPUS, memory_mib=64, streams=16) as devices, \
            Dispatcher(gpus=GPUS, services=SERVICES, max_per_gpu=4) as d:
        threads = [threading.Thread(target=worker,
                                    args=(d, devices, s.name, requests_per_worker, 7 * i + j,
                                          per_gpu, errors))
                   for i, s in enumerate(SERVICES) for j in range(workers_per_service)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {
            "requests_per_gpu": per_gpu,
            "services": {s.name: d.service_metrics(s.name) for s in SERVICES},
            "gpus": [d.gpu_metrics(g) for g in range(GPUS)],
            "errors": errors,
        }


if __name__ == "__main__":
    report = main()
    print(json.dumps(report, indent=2))
    sys.exit(1 if report["errors"] else 0)
