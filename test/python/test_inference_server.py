#!/usr/bin/env python3
"""Starts examples/inference_server.py on port 0 with 3 simulated GPUs, sends concurrent
requests, checks that every one was served, that more than one GPU served them and that the
metrics agree, then shuts the server down. Needs GPUSCHED_C_LIB and PYTHONPATH=python (ctest
sets both)."""

import json
import os
import sys
import threading
import unittest
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "python"))

import inference_server  # noqa: E402
from gpusched import GpuschedError  # noqa: E402


def post(port, payload, timeout=30):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/infer", data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return json.loads(r.read())


class InferenceServerTest(unittest.TestCase):
    CLIENTS, PER_CLIENT = 8, 6

    def test_concurrent_requests_are_all_served_over_several_gpus(self):
        server = inference_server.InferenceServer(gpus=3, port=0, model="sim").start()
        try:
            self.assertNotEqual(server.port, 0)
            self.assertEqual(get(server.port, "/healthz"), {"ok": True})
            replies, errors = [], []
            lock = threading.Lock()

            def client(c):
                for i in range(self.PER_CLIENT):
                    service = "detect" if (c + i) % 3 == 0 else "classify"
                    code, body = post(server.port, {"service": service, "work": 1,
                                                    "input": [c, i, 0.5]})
                    with lock:
                        (replies if code == 200 else errors).append((code, body))

            threads = [threading.Thread(target=client, args=(c,)) for c in range(self.CLIENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            self.assertFalse(any(t.is_alive() for t in threads), "a client hung")
            total = self.CLIENTS * self.PER_CLIENT
            self.assertEqual(errors, [])
            self.assertEqual(len(replies), total)
            for _, body in replies:  # the model ran on the granted GPU: input times 2
                self.assertIn(body["gpu"], range(3))
                self.assertEqual(body["output"][2], 1.0)
                self.assertGreaterEqual(body["queue_ms"], 0)
            gpus_used = {body["gpu"] for _, body in replies}
            self.assertGreater(len(gpus_used), 1, f"every request went to GPU {gpus_used}")

            m = get(server.port, "/metrics")
            self.assertEqual(m["model"], "simulated")
            self.assertEqual(sum(m["served_per_gpu"]), total)
            self.assertEqual(sum(1 for n in m["served_per_gpu"] if n > 0), len(gpus_used))
            self.assertEqual(sum(s["completed"] for s in m["services"].values()), total)
            self.assertEqual(sum(g["started"] for g in m["gpu_metrics"]), total)
            self.assertTrue(all(g["running"] == 0 for g in m["gpu_metrics"]))
            self.assertEqual(m["failed"], 0)
            self.assertGreater(m["services"]["detect"]["run_ms_mean"],
                               m["services"]["classify"]["run_ms_mean"])

            code, body = post(server.port, {"service": "translate"})
            self.assertEqual(code, 400)
            self.assertIn("service: must be one of", body["error"])
            code, body = post(server.port, {"work": -1})
            self.assertEqual(code, 400)
            self.assertIn("work:", body["error"])
        finally:
            server.close()
        # Shut down cleanly: the port is closed and the dispatcher refuses calls.
        with self.assertRaises(OSError):
            get(server.port, "/healthz")
        with self.assertRaises(GpuschedError):
            server.dispatcher.acquire("classify")

    def test_no_gpu_granted_in_time_is_503(self):
        with inference_server.InferenceServer(gpus=1, port=0, max_per_gpu=1,
                                              acquire_timeout_ms=20) as server:
            held = server.dispatcher.acquire("classify")
            try:
                code, body = post(server.port, {"work": 0})
            finally:
                server.dispatcher.release(held)
            self.assertEqual(code, 503)
            self.assertIn("max_per_gpu", body["error"])
            self.assertEqual(server.metrics()["refused"], 1)
            self.assertEqual(post(server.port, {"work": 0})[0], 200)


class ParseRequestTest(unittest.TestCase):
    def test_random_bodies_are_parsed_or_refused_naming_a_field(self):
        import random
        seed = 17
        rng = random.Random(seed)
        services = {"classify": None, "detect": None}
        atoms = [None, True, -1, 0, 1.5, 1e400, 10**400, "x", "classify", [], {}, [1, "a"],
                 [2.0], [10**400]]
        for _ in range(2000):
            if rng.random() < 0.3:
                body = bytes(rng.randrange(256) for _ in range(rng.randrange(12)))
            else:
                obj = {k: rng.choice(atoms) for k in rng.sample(["service", "work", "input", "z"],
                                                                 rng.randrange(5))}
                body = json.dumps(rng.choice([obj, [obj], 3])).encode()
            try:
                service, work, values = inference_server.parse_request(body, services)
            except inference_server.BadRequest as e:
                self.assertRegex(str(e), r"^(body|service|work|input):", f"seed {seed}")
                continue
            self.assertIn(service, services)
            self.assertTrue(0 <= work <= 1000)
            self.assertTrue(all(isinstance(v, float) for v in values))


if __name__ == "__main__":
    unittest.main()
