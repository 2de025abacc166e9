"""A real `gpusched dev` (server, SQLite, agents with simulated GPUs) for the web tests, the
CLI against it (real gRPC) and a JSON HTTP client for its REST API. Python stdlib only."""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

# Loopback only: a proxy from the environment must never see these requests.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def wait_or_kill(proc, timeout):
    """Waits `timeout` seconds for `proc` to exit, then kills it."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Reply:
    def __init__(self, status, body, headers):
        self.status = status
        self.body = body
        self.headers = headers

    def json(self):
        return json.loads(self.body)


class DevCluster:
    """`gpusched dev --agents N --gpus G` on free ports; stop() (or `with`) ends it."""

    def __init__(self, gpusched, agents=2, gpus="2x16GiB", extra=()):
        self.gpusched = gpusched
        self.dir = tempfile.mkdtemp(prefix="gpusched-web-")
        self.log_path = os.path.join(self.dir, "dev.log")
        env = dict(os.environ, no_proxy="127.0.0.1,localhost", NO_PROXY="127.0.0.1,localhost")
        self.env = env
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [gpusched, "dev", "--agents", str(agents), "--gpus", gpus, "--listen",
             "127.0.0.1:0", "--http", "127.0.0.1:0", "--data-dir",
             os.path.join(self.dir, "state"), *extra],
            stdout=self._log, stderr=subprocess.STDOUT, env=env)
        self.http = self._wait_for("dashboard: (http://127.0.0.1:[0-9]+)/")
        self.grpc = self._wait_for("server (127.0.0.1:[0-9]+)")
        self.env["GPUSCHED_SERVER"] = self.grpc  # for the CLI (flags after `--` are the task's)
        self.wait(lambda: len(self.get("/api/v1/nodes").json()["nodes"]) == agents,
                  "agents registered")

    def _wait_for(self, pattern, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with open(self.log_path, "r", errors="replace") as f:
                m = re.search(pattern, f.read())
            if m:
                return m.group(1)
            if self.proc.poll() is not None:
                raise RuntimeError("gpusched dev exited: " + self.log())
            time.sleep(0.05)
        raise RuntimeError("gpusched dev did not print /%s/: %s" % (pattern, self.log()))

    def log(self):
        with open(self.log_path, "r", errors="replace") as f:
            return f.read()[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        wait_or_kill(self.proc, 20)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # ---- the CLI (gRPC)
    def cli(self, *args):
        r = subprocess.run([self.gpusched, *args], env=self.env,
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError("gpusched %s: exit %d: %s" % (args, r.returncode, r.stderr))
        return r.stdout

    def submit(self, *args):
        """`gpusched submit ARGS`; returns the task id."""
        return int(self.cli("submit", *args).strip())

    # ---- the REST API
    def request(self, method, path, body=None, headers=None, raw=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                            else None)
        h = {"Content-Type": "application/json"} if data is not None or method == "POST" else {}
        h.update(headers or {})
        req = urllib.request.Request(self.http + path, data=data, method=method, headers=h)
        try:
            with _OPENER.open(req, timeout=15) as r:
                return Reply(r.status, r.read(), dict(r.headers))
        except urllib.error.HTTPError as e:
            return Reply(e.code, e.read(), dict(e.headers))

    def get(self, path):
        return self.request("GET", path)

    def wait(self, predicate, what, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                if predicate():
                    return
            except (KeyError, IndexError, ValueError, OSError):
                pass
            time.sleep(0.1)
        raise AssertionError("timed out waiting for " + what + "\n" + self.log())

    def wait_state(self, task, state, timeout=30):
        self.wait(lambda: self.get("/api/v1/tasks/%d" % task).json()["state"] == state,
                  "task %d %s" % (task, state), timeout)
