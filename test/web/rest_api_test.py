"""REST API tests against a real `gpusched dev`: every endpoint, pagination, filters, bad
parameters (400 naming the parameter), unknown tasks (404), the event and log streams.

    python3 rest_api_test.py GPUSCHED_BINARY
"""

import json
import os
import pwd
import sys
import time
import unittest
import urllib.request

from devcluster import DevCluster, _OPENER

# Issue 35: without tokens a caller is the Unix user owning its loopback connection.
ME = pwd.getpwuid(os.geteuid()).pw_name

GPUSCHED = None
C = None  # one cluster for the whole module: starting one costs more than every test here


def setUpModule():
    global C
    C = DevCluster(GPUSCHED, agents=2, gpus="2x16GiB")


def tearDownModule():
    C.stop()


def sse_events(path, until, timeout=20):
    """Reads server-sent events from `path` until `until(name, data)` is true; returns them."""
    req = urllib.request.Request(C.http + path, headers={"Accept": "text/event-stream"})
    events, name = [], None
    deadline = time.time() + timeout
    with _OPENER.open(req, timeout=timeout) as r:
        assert r.headers["Content-Type"].startswith("text/event-stream"), r.headers
        while time.time() < deadline:
            line = r.readline().decode()
            if not line:
                break
            line = line.rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                events.append((name, data))
                if until(name, data):
                    return events
    raise AssertionError("stream %s ended without the expected event: %s" % (path, events))


class RestApiTest(unittest.TestCase):
    def assertError(self, reply, status, field, *words):
        self.assertEqual(reply.status, status, reply.body)
        self.assertTrue(reply.headers["Content-Type"].startswith("application/json"))
        err = reply.json()["error"]
        self.assertEqual(err["status"], status)
        self.assertEqual(err["field"], field, err)
        for w in words:
            self.assertIn(w, err["message"])

    def submit(self, **body):
        r = C.request("POST", "/api/v1/tasks", body)
        self.assertEqual(r.status, 201, r.body)
        return r.json()["id"]

    # ---------------------------------------------------------------- documents

    def test_openapi_names_every_route(self):
        doc = C.get("/api/v1/openapi.json").json()
        self.assertEqual(doc["openapi"], "3.0.3")
        for path in ["/api/v1/tasks", "/api/v1/tasks/{id}", "/api/v1/tasks/{id}/cancel",
                     "/api/v1/tasks/{id}/logs", "/api/v1/nodes", "/api/v1/queues",
                     "/api/v1/accounting", "/api/v1/events"]:
            self.assertIn(path, doc["paths"])
        # The bearer token and the errors it brings (docs/auth.md).
        self.assertEqual(doc["components"]["securitySchemes"]["bearerToken"]["scheme"], "bearer")
        self.assertIn("401", doc["paths"]["/api/v1/tasks"]["get"]["responses"])
        self.assertIn("403", doc["paths"]["/api/v1/tasks/{id}/cancel"]["post"]["responses"])
        self.assertIn("403", doc["paths"]["/api/v1/tasks/{id}/logs"]["get"]["responses"])

    def test_dashboard_is_served_from_the_binary(self):
        r = C.get("/")
        self.assertEqual(r.status, 200)
        self.assertIn(b"/ui/app.js", r.body)
        self.assertIn("script-src 'self'", r.headers["Content-Security-Policy"])
        self.assertEqual(C.get("/ui/app.js").headers["Content-Type"],
                         "text/javascript; charset=utf-8")
        self.assertEqual(C.get("/ui/nope.js").status, 404)

    # ---------------------------------------------------------------- tasks

    def test_submit_show_cancel(self):
        whole = self.submit(command=["sleep", "30"], gpus=1, name="rest-whole")
        shared = self.submit(command=["sleep", "30"], gpu_mem="3GiB", name="rest-shared",
                             duration=600, env={"A": "b"})
        C.wait_state(whole, "running")
        C.wait_state(shared, "running")
        # The executor's status comes with the agent's next report, after the state: wait for
        # it, or the REST answer and the CLI's below could straddle that report.
        C.wait(lambda: C.get("/api/v1/tasks/%d" % shared).json()["executor_status"] == "running",
               "task %d executor_status running" % shared)
        t = C.get("/api/v1/tasks/%d" % shared).json()
        self.assertEqual(t["name"], "rest-shared")
        self.assertEqual(t["gpu_mem_mib"], 3072)
        self.assertEqual(t["placement"]["gpu_mem_mib"], [3072])
        self.assertEqual([h["state"] for h in t["history"]][:1], ["pending"])
        self.assertIn("running", [h["state"] for h in t["history"]])
        self.assertEqual(t["why"]["state"], "running")
        self.assertGreater(t["why"]["total_nodes"], 0)
        self.assertEqual((t["user"], t["team"]), (ME, "default"))
        # The same shape as `gpusched show --json`, plus the REST extras.
        cli = json.loads(C.cli("show", str(shared), "--json"))
        # elapsed_ms is at each answer's own time; the heartbeat-fed keys may change between the
        # two answers (the agent reports on its own clock).
        changing = {"history", "elapsed_ms", "last_heartbeat_ms", "gpu_util", "gpu_mem_used_mib",
                    "idle", "idle_since_ms", "executor_status", "executor_detail"}
        self.assertLessEqual(set(cli), set(t))
        for key, value in cli.items():
            if key not in changing:
                self.assertEqual(t[key], value, key)
        r = C.request("POST", "/api/v1/tasks/%d/cancel" % whole, {})
        self.assertEqual(r.status, 200, r.body)
        self.assertIn(r.json()["state"], ["cancelled", "running"])
        C.wait_state(whole, "cancelled")
        self.assertError(C.request("POST", "/api/v1/tasks/%d/cancel" % whole, {}), 409, "",
                         "already cancelled")
        C.request("POST", "/api/v1/tasks/%d/cancel" % shared, {})

    def test_submit_is_idempotent_with_a_key(self):
        a = C.request("POST", "/api/v1/tasks", {"command": ["true"]},
                      headers={"Idempotency-Key": "rest-key-1"}).json()["id"]
        b = C.request("POST", "/api/v1/tasks", {"command": ["true"],
                                                "idempotency_key": "rest-key-1"}).json()["id"]
        self.assertEqual(a, b)

    def test_bad_submissions_name_the_field(self):
        post = lambda body: C.request("POST", "/api/v1/tasks", raw=body.encode())
        self.assertError(post("{not json"), 400, "body", "not valid JSON")
        self.assertError(post("[1]"), 400, "body", "JSON object")
        self.assertError(post('{"command": ["x"], "gpuz": 1}'), 400, "gpuz", "unknown field")
        self.assertError(post('{"command": ["x"], "gpus": "two"}'), 400, "gpus", '"two"')
        self.assertError(post('{"command": ["x"], "gpus": -1}'), 400, "gpus", ">= 0")
        self.assertError(post('{"command": ["x", [3]]}'), 400, "command", "single value")
        self.assertError(post('{"command": ["x"], "gpu_mem": "12XB"}'), 400, "gpu_mem", "12XB")
        self.assertError(post('{"command": ["x"], "env": {"K": [1]}}'), 400, "env")
        self.assertError(post('{"command": ["x"], "export": "ALL"}'), 400, "export", "env")
        self.assertError(post('{"command": ["x"], "workdir": "rel"}'), 400, "workdir", "absolute")
        self.assertError(post('{"name": "no command"}'), 400, "command", "missing")
        self.assertError(C.request("POST", "/api/v1/tasks", raw=b'{"command": ["x"]}',
                                   headers={"Content-Type": "text/plain"}),
                         400, "Content-Type", "application/json")
        # Valid JSON the scheduler refuses: no node could ever hold 99 GPUs.
        r = C.request("POST", "/api/v1/tasks", {"command": ["x"], "gpus": 99})
        self.assertEqual(r.status, 422, r.body)
        self.assertEqual(C.request("POST", "/api/v1/tasks", {"command": ["x"]},
                                   headers={"Idempotency-Key": "a", }).status, 201)
        self.assertError(C.request("POST", "/api/v1/tasks", {"command": ["x"],
                                                             "idempotency_key": "b"},
                                   headers={"Idempotency-Key": "c"}), 400, "idempotency_key")

    def test_pagination_visits_every_task_once_in_id_order(self):
        ids = [self.submit(command=["true"], name="page-%d" % i) for i in range(7)]
        seen, after, pages = [], 0, 0
        while True:
            page = C.get("/api/v1/tasks?limit=3&after=%d" % after).json()
            seen += [t["id"] for t in page["tasks"]]
            pages += 1
            self.assertLessEqual(len(page["tasks"]), 3)
            if page["next_after"] is None:
                break
            after = page["next_after"]
        self.assertEqual(seen, sorted(set(seen)))
        self.assertTrue(set(ids) <= set(seen))
        self.assertGreaterEqual(pages, 3)
        # A page starts after its cursor.
        page = C.get("/api/v1/tasks?limit=2&after=%d" % ids[2]).json()
        self.assertEqual([t["id"] for t in page["tasks"]], ids[3:5])

    def test_filters(self):
        t = self.submit(command=["sleep", "30"], gpu_mem="1GiB")
        C.wait_state(t, "running")
        node = C.get("/api/v1/tasks/%d" % t).json()["node"]
        running = C.get("/api/v1/tasks?state=running&limit=1000").json()["tasks"]
        self.assertIn(t, [x["id"] for x in running])
        self.assertTrue(all(x["state"] == "running" for x in running))
        on_node = C.get("/api/v1/tasks?node=%s&limit=1000" % node).json()["tasks"]
        self.assertIn(t, [x["id"] for x in on_node])
        self.assertTrue(all(x["node"] == node for x in on_node))
        self.assertEqual(C.get("/api/v1/tasks?node=no-such-node").json(),
                         {"tasks": [], "next_after": None})
        self.assertIn(t, [x["id"] for x in
                          C.get("/api/v1/tasks?team=default&user=%s&limit=1000" % ME)
                          .json()["tasks"]])
        self.assertEqual(C.get("/api/v1/tasks?team=nobody").json()["tasks"], [])
        C.request("POST", "/api/v1/tasks/%d/cancel" % t, {})

    # (path, the parameter the 400 must name, words its message must hold)
    BAD_PARAMETERS = [
        ("/api/v1/tasks?limit=0", "limit", ['"0"', "1..1000"]),
        ("/api/v1/tasks?limit=abc", "limit", ['"abc"']),
        ("/api/v1/tasks?limit=1001", "limit", []),
        ("/api/v1/tasks?after=-1", "after", []),
        ("/api/v1/tasks?state=sleeping", "state", ['"sleeping"']),
        ("/api/v1/tasks?color=red", "color", ["unknown query"]),
        ("/api/v1/tasks?limit=1&limit=2", "limit", ["more than once"]),
        ("/api/v1/tasks/abc", "id", ['"abc"']),
        ("/api/v1/tasks/0", "id", []),
        ("/api/v1/queues?limit=x", "limit", []),
        ("/api/v1/nodes?x=1", "x", []),
        ("/api/v1/tasks/1/logs?offset=-5", "offset", []),
        ("/api/v1/tasks/1/logs?follow=maybe", "follow", []),
        ("/api/v1/accounting?by=planet", "by", ['"planet"']),
        ("/api/v1/accounting?since=yesterday", "since", ["yesterday"]),
        ("/api/v1/accounting?since=1h&until=2h", "since", ["before"]),
        ("/api/v1/accounting?since=24h&step=1s", "step", ["2000"]),
        ("/api/v1/accounting?step=0s", "step", []),
    ]

    def test_bad_parameters_name_the_parameter(self):
        for path, field, words in self.BAD_PARAMETERS:
            with self.subTest(path=path):
                self.assertError(C.get(path), 400, field, *words)

    def test_unknown_task_and_path_are_404(self):
        self.assertError(C.get("/api/v1/tasks/999999"), 404, "task", "999999")
        self.assertError(C.request("POST", "/api/v1/tasks/999999/cancel", {}), 404, "task")
        self.assertError(C.get("/api/v1/tasks/999999/logs"), 404, "task")
        self.assertError(C.get("/api/v1/tasks/999999/logs?follow=1"), 404, "task")
        self.assertError(C.get("/api/v1/nope"), 404, "path")
        self.assertError(C.request("DELETE", "/api/v1/tasks"), 404, "path")

    # ---------------------------------------------------------------- logs and events

    def test_logs_and_their_stream(self):
        t = self.submit(command=["sh", "-c", "echo first-line; sleep 0.3; echo second-line"])
        events = sse_events("/api/v1/tasks/%d/logs?follow=1" % t, lambda n, d: n == "end")
        text = "".join(d["data"] for n, d in events if n == "log")
        self.assertEqual(text, "first-line\nsecond-line\n")
        chunk = C.get("/api/v1/tasks/%d/logs" % t).json()
        self.assertEqual(chunk["data"], text)
        self.assertTrue(chunk["task_done"])
        self.assertEqual(chunk["next_offset"], len(text))
        tail = C.get("/api/v1/tasks/%d/logs?offset=11&max_bytes=6" % t).json()
        self.assertEqual(tail["data"], "second")

    def test_events_name_the_changed_task(self):
        holder = {}

        def submit_once(name, data):
            if name == "hello":
                holder["id"] = self.submit(command=["true"])
            return name == "change" and holder.get("id") in data["ids"]

        events = sse_events("/api/v1/events", submit_once)
        self.assertEqual(events[0][0], "hello")

    # ---------------------------------------------------------------- nodes, queues, accounting

    def test_nodes_split_each_gpu_by_its_tasks(self):
        a = self.submit(command=["sleep", "30"], gpu_mem="5GiB", cpu="1500m")
        b = self.submit(command=["sleep", "30"], gpus=1)
        C.wait_state(a, "running")
        C.wait_state(b, "running")
        nodes = C.get("/api/v1/nodes").json()["nodes"]
        self.assertEqual([n["name"] for n in nodes], sorted(n["name"] for n in nodes))
        shares = {}
        for n in nodes:
            self.assertIn(n["state"], ["ready", "cordoned", "draining"])
            # Issue 42 (CN110955526B claim 2 across nodes): a Spark driver's stage plan reads
            # free_cpus (whole CPUs not reserved by the node's tasks).
            self.assertGreater(n["cpu_milli"], 0)
            self.assertEqual(n["free_cpus"], (n["cpu_milli"] - n["cpu_allocated_milli"]) // 1000)
            for g in n["gpus"]:
                self.assertEqual(sum(s["mib"] for s in g["shares"]), g["allocated_mib"])
                self.assertEqual(g["free_mib"], g["total_mib"] - g["allocated_mib"])
                self.assertEqual([s["task"] for s in g["shares"]],
                                 sorted(s["task"] for s in g["shares"]))
                for s in g["shares"]:
                    shares[s["task"]] = (s, g)
        self.assertEqual(shares[a][0]["mib"], 5120)
        on_a = next(n for n in nodes if n["name"] == C.get("/api/v1/tasks/%d" % a).json()["node"])
        self.assertGreaterEqual(on_a["cpu_allocated_milli"], 1500)
        self.assertFalse(shares[a][0]["exclusive"])
        self.assertTrue(shares[b][0]["exclusive"])
        self.assertEqual(shares[b][0]["mib"], shares[b][1]["total_mib"])
        for t in (a, b):
            C.request("POST", "/api/v1/tasks/%d/cancel" % t, {})

    def test_queues_show_pending_tasks_in_order_with_their_reason(self):
        C.cli("cordon", "dev-1")
        C.cli("cordon", "dev-2")
        try:
            ids = [self.submit(command=["true"], gpus=1, duration=d) for d in (7200, 60, 60)]
            C.wait(lambda: all(C.get("/api/v1/tasks/%d" % i).json()["why"]["total_nodes"] > 0
                               for i in ids), "a scheduling pass over the new tasks")
            q = C.get("/api/v1/queues").json()
            # A task whose placement failed waits in FQ (PATENTS.md section 6, the server's
            # default capacity_wait: failure_queue) until FQ returns it to Q, demoted.
            self.assertEqual([t for t in q["Q"]["tasks"] if t["id"] in ids], [])
            listed = [t for t in q["FQ"]["tasks"] if t["id"] in ids]
            self.assertEqual(sorted(t["id"] for t in listed), sorted(ids))
            for name in ("Q", "FQ"):
                self.assertEqual(set(q[name].keys()), {"size", "tasks"})
                self.assertEqual([t["position"] for t in q[name]["tasks"]],
                                 list(range(1, len(q[name]["tasks"]) + 1)))
            for t in listed:
                self.assertIn("cordon", t["why"])
                self.assertEqual(t["fail_cnt"], 0)  # waiting for capacity is no failure
            self.assertEqual(C.get("/api/v1/queues?limit=1").json()["FQ"]["size"],
                             q["FQ"]["size"])
            self.assertEqual(len(C.get("/api/v1/queues?limit=1").json()["FQ"]["tasks"]), 1)
            cordoned = [n for n in C.get("/api/v1/nodes").json()["nodes"]]
            self.assertEqual({n["state"] for n in cordoned}, {"cordoned"})
        finally:
            C.cli("uncordon", "dev-1")
            C.cli("uncordon", "dev-2")

    def test_accounting_counts_gpu_hours_of_run_intervals(self):
        t = self.submit(command=["sleep", "1"], gpus=1)
        C.wait_state(t, "succeeded")
        acct = C.get("/api/v1/accounting?since=10m&step=1m").json()
        self.assertEqual(acct["by"], "team")
        self.assertEqual(acct["steps"], 10)
        self.assertEqual(acct["step_ms"], 60000)
        (g,) = acct["groups"]
        self.assertEqual(g["name"], "default")
        self.assertGreaterEqual(g["tasks"], 1)
        # At least this task's second on one whole GPU of 16 GiB.
        self.assertGreaterEqual(g["gpu_hours"], 0.9 / 3600)
        self.assertGreaterEqual(g["gpu_mem_gib_hours"], 0.9 * 16 / 3600)
        self.assertAlmostEqual(sum(g["gpu_hours_by_step"]), g["gpu_hours"], places=9)
        by_user = C.get("/api/v1/accounting?since=10m&by=user").json()
        self.assertEqual([x["name"] for x in by_user["groups"]], [ME])
        self.assertEqual(C.get("/api/v1/accounting?since=10m&team=other").json()["groups"], [])
        old = C.get("/api/v1/accounting?since=3h&until=2h").json()
        self.assertEqual(old["groups"], [])


if __name__ == "__main__":
    GPUSCHED = sys.argv.pop(1)
    unittest.main(verbosity=2)
