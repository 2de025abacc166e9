"""The dashboard in a real headless Chromium against a real `gpusched dev`: whole-GPU and
shared tasks submitted with the CLI (gRPC), each page opened, the DOM asserted, screenshots
saved, and any JavaScript error of a page fails its test.

    python3 browser_test.py GPUSCHED_BINARY SCREENSHOT_DIR

Exits 77 (ctest: skipped) when no Chromium is installed.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from cdp import Browser, find_chromium
from devcluster import DevCluster

GPUSCHED = SHOTS = None
C = B = None
T = {}  # task name -> id


def setUpModule():
    global C, B
    C = DevCluster(GPUSCHED, agents=2, gpus="2x16GiB")
    # dev-2 cordoned: everything lands on dev-1, whose two GPUs end up one whole and one
    # shared, and one more whole-GPU task must wait.
    C.cli("cordon", "dev-2")
    T["whole"] = C.submit("--gpus", "1", "--name", "train-whole", "--",
                          "sh", "-c", "echo training started; sleep 120")
    T["share4"] = C.submit("--gpu-mem", "4GiB", "--name", "infer-a", "--", "sleep", "120")
    T["share8"] = C.submit("--gpu-mem", "8GiB", "--name", "infer-b", "--", "sleep", "120")
    for name in ("whole", "share4", "share8"):
        C.wait_state(T[name], "running")
    T["waits"] = C.submit("--gpus", "1", "--name", "waits", "--", "true")
    C.wait(lambda: C.get("/api/v1/tasks/%d" % T["waits"]).json()["why"]["total_nodes"] > 0,
           "a scheduling pass over the waiting task")
    B = Browser()
    B.viewport(1280, 800)


def tearDownModule():
    if B:
        B.close()
    if C:
        C.stop()


class DashboardTest(unittest.TestCase):
    def open(self, route, ready, what):
        B.navigate(C.http + "/#/" + route)
        try:
            B.wait_for("document.getElementById('main').dataset.view === '%s' && !!(%s)" %
                       (route.split("/")[0], ready), what)
        except AssertionError as e:
            raise AssertionError("%s\nthe page shows: %r\nerrors: %s" % (
                e, B.evaluate("document.body.innerText")[:1500], B.page_errors())) from None

    def shot(self, name):
        B.screenshot(os.path.join(SHOTS, name))

    def assertNoPageErrors(self):
        self.assertEqual(B.page_errors(), [])

    def test_1_cluster_shows_gpu_bars_sized_by_memory(self):
        self.open("cluster", "document.querySelectorAll('.seg').length >= 3", "GPU bars")
        segs = B.evaluate("""[...document.querySelectorAll('.gpu-bar')].map(bar => ({
            total: +bar.dataset.totalMib, width: bar.clientWidth,
            node: bar.closest('.node').dataset.node,
            segs: [...bar.querySelectorAll('.seg')].map(s => ({
              task: +s.dataset.task, mib: +s.dataset.mib,
              width: s.getBoundingClientRect().width}))}))""")
        by_task = {s["task"]: (s, bar) for bar in segs for s in bar["segs"]}
        for name, mib in (("whole", 16384), ("share4", 4096), ("share8", 8192)):
            s, bar = by_task[T[name]]
            self.assertEqual(bar["node"], "dev-1")
            self.assertEqual(s["mib"], mib)
            # The segment's width is its share of the GPU's memory (2 px of borders).
            self.assertAlmostEqual(s["width"] / bar["width"], mib / bar["total"], delta=0.02)
        # The two shared tasks split one GPU (CN109992422A): 12 of its 16 GiB.
        self.assertIs(by_task[T["share4"]][1], by_task[T["share8"]][1])
        states = B.evaluate("""Object.fromEntries([...document.querySelectorAll('.node')]
            .map(n => [n.dataset.node, n.querySelector('.node-state').textContent]))""")
        self.assertEqual(states, {"dev-1": "ready", "dev-2": "cordoned"})
        self.shot("cluster-1280x800.png")
        self.assertNoPageErrors()

    def test_2_queues_show_the_pending_task_and_why(self):
        # A task whose placement failed waits in the failure queue (PATENTS.md section 6, the
        # server's default capacity_wait: failure_queue) until FQ returns it to Q.
        self.open("queues", "document.querySelector('#queue-FQ tr[data-task=\"%d\"]')"
                  % T["waits"], "the waiting task in FQ")
        row = B.evaluate("""(() => { const r = document.querySelector(
            '#queue-FQ tr[data-task="%d"]'); return [...r.cells].map(c => c.textContent); })()"""
                         % T["waits"])
        self.assertEqual(row[1], "#%d" % T["waits"])
        self.assertEqual(row[2], "waits")
        self.assertEqual(row[4], "0")  # fail_cnt
        self.assertIn("0/2 nodes", row[5])
        self.assertIn("cordon", row[5])
        self.shot("queues-1280x800.png")
        self.assertNoPageErrors()

    def test_3_task_page_timeline_placement_live_log_and_cancel(self):
        t = T["whole"]
        self.open("task/%d" % t, "document.getElementById('log') && "
                  "document.getElementById('log').textContent.includes('training started')",
                  "the task's live log")
        facts = B.evaluate("""Object.fromEntries([...document.querySelectorAll('dd[data-fact]')]
            .map(d => [d.dataset.fact, d.textContent]))""")
        self.assertEqual(facts["state"], "running")
        self.assertTrue(facts["placement"].startswith("dev-1 GPU "), facts)
        self.assertIn("16 GiB", facts["placement"])
        self.assertGreaterEqual(B.evaluate("document.querySelectorAll('.timeline .tl').length"), 3)
        self.assertGreater(B.evaluate("document.querySelectorAll('.breakdown tbody tr').length"), 0)
        self.shot("task-running-1280x800.png")
        # Cancel from the page: the state changes through the event stream, without a reload.
        B.evaluate("window.notReloaded = true; document.getElementById('cancel').click()")
        B.wait_for("document.querySelector('dd[data-fact=\"state\"]').textContent === "
                   "'cancelled'", "the cancelled state, live")
        self.assertTrue(B.evaluate("window.notReloaded === true"))
        self.assertIn("cancelled", B.evaluate("document.querySelector('dd[data-fact=\"exit\"]')"
                                              ".textContent + document.querySelector("
                                              "'dd[data-fact=\"why\"]').textContent"))
        # Issue 41: how it ended, in the words `ls` and `show` use.
        B.wait_for("document.querySelector('dd[data-fact=\"ended by\"]').textContent === "
                   "'cancelled'", "the failure field")
        self.shot("task-cancelled-1280x800.png")
        self.assertNoPageErrors()

    def test_4_accounting_draws_a_chart(self):
        self.open("accounting/15m", "document.querySelectorAll('#acct-chart rect.bar').length",
                  "the chart's bars")
        groups = B.evaluate("[...document.querySelectorAll('#acct-chart rect.bar')]"
                            ".map(r => r.dataset.group)")
        self.assertEqual(set(groups), {"default"})
        heights = B.evaluate("[...document.querySelectorAll('#acct-chart rect.bar')]"
                             ".map(r => r.getBoundingClientRect().height)")
        self.assertGreater(max(heights), 10)
        row = B.evaluate("[...document.querySelector('tr[data-group=\"default\"]').cells]"
                         ".map(c => c.textContent)")
        self.assertGreater(float(row[1]), 0)
        self.shot("accounting-1280x800.png")
        self.assertNoPageErrors()

    def test_5_keyboard_reaches_the_views(self):
        B.navigate("about:blank")  # a fresh load: the first Tab starts at the top
        self.open("cluster", "document.querySelectorAll('.seg').length", "cluster")
        B.call("Input.dispatchKeyEvent", type="keyDown", key="Tab", code="Tab",
               windowsVirtualKeyCode=9)
        B.call("Input.dispatchKeyEvent", type="keyUp", key="Tab", code="Tab",
               windowsVirtualKeyCode=9)
        self.assertEqual(B.evaluate("document.activeElement.className"), "skip")
        # Every control is a link or a button: focusable and operable with Enter.
        self.assertEqual(B.evaluate("document.querySelectorAll('[onclick], div[tabindex]')"
                                    ".length"), 0)
        B.evaluate("document.querySelector('nav a[data-view=\"queues\"]').focus()")
        B.call("Input.dispatchKeyEvent", type="keyDown", key="Enter", code="Enter",
               windowsVirtualKeyCode=13, text="\r")
        B.call("Input.dispatchKeyEvent", type="keyUp", key="Enter", code="Enter",
               windowsVirtualKeyCode=13)
        B.wait_for("document.getElementById('main').dataset.view === 'queues'", "queues view")
        self.assertNoPageErrors()

    def test_6_phone_layout_fits_the_screen(self):
        B.viewport(390, 844, mobile=True)
        try:
            self.open("cluster", "document.querySelectorAll('.seg').length", "cluster")
            self.assertLessEqual(B.evaluate("document.documentElement.scrollWidth"), 390)
            self.shot("cluster-phone-390x844.png")
            self.open("task/%d" % T["share4"], "document.querySelector('dd[data-fact]')",
                      "task")
            self.assertLessEqual(B.evaluate("document.documentElement.scrollWidth"), 390)
            self.shot("task-phone-390x844.png")
        finally:
            B.viewport(1280, 800)
        self.assertNoPageErrors()

    def test_7_a_javascript_error_is_caught(self):
        # The check the other tests rely on: an error thrown in the page is seen.
        B.evaluate("setTimeout(() => { throw new Error('deliberate-test-error'); }, 0); 1")
        B.wait_for("window.gpuschedErrors.length > 0", "the page's error hook")
        errors = B.page_errors()
        self.assertTrue(any("deliberate-test-error" in e for e in errors), errors)
        self.assertTrue(B.evaluate("!document.getElementById('js-error').hidden"))
        B.errors.clear()
        B.evaluate("window.gpuschedErrors.length = 0")


class TokenSignInTest(unittest.TestCase):
    """A server with `--auth token`: the dashboard asks for a token once, keeps it for the tab
    in sessionStorage and sends it in a header on every request and stream, never in a URL."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="gpusched-web-auth-")
        cls.log = open(os.path.join(cls.dir, "server.log"), "wb")
        cls.proc = subprocess.Popen(
            [GPUSCHED, "server", "--auth", "token", "--listen", "127.0.0.1:0", "--http",
             "127.0.0.1:0", "--data-dir", os.path.join(cls.dir, "data")],
            stdout=cls.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        cls.http = None
        while time.time() < deadline and cls.http is None:
            with open(os.path.join(cls.dir, "server.log"), errors="replace") as f:
                m = re.search(r"listening on 127.0.0.1:[0-9]+, http ([0-9]+)", f.read())
            if m:
                cls.http = "http://127.0.0.1:" + m.group(1)
            time.sleep(0.05)
        if cls.http is None:
            raise RuntimeError("gpusched server --auth token did not start")
        with open(os.path.join(cls.dir, "data", "admin-token")) as f:
            cls.token = f.read().strip()

    @classmethod
    def tearDownClass(cls):
        cls.proc.send_signal(signal.SIGTERM)
        try:
            cls.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            cls.proc.kill()
            cls.proc.wait()
        cls.log.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def sign_in(self, token):
        B.evaluate("document.getElementById('token-input').value = %r; "
                   "document.querySelector('#sign-in button').click(); 1" % token)

    def test_1_asks_for_a_token_then_works_live_and_keeps_it_out_of_urls(self):
        B.navigate(self.http + "/#/cluster")
        B.wait_for("!!document.getElementById('sign-in')", "the sign-in form")
        self.shot("sign-in-1280x800.png")
        self.sign_in("gst_0123456789abcdef_" + "a" * 64)  # well formed, unknown
        B.wait_for("!!document.getElementById('sign-in') && "
                   "document.querySelector('#sign-in .error') !== null", "the refusal")
        self.sign_in(self.token)
        B.wait_for("document.getElementById('main').dataset.view === 'cluster' && "
                   "!document.getElementById('sign-in')", "the cluster view")
        B.wait_for("document.getElementById('live').textContent === 'live'",
                   "the event stream, with the token in its header")
        self.assertEqual(B.evaluate("sessionStorage.getItem('gpusched-token')"), self.token)
        self.assertNotIn(self.token, B.evaluate("location.href"))
        urls = B.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
        self.assertTrue(any("/api/v1/events" in u for u in urls), urls)
        self.assertFalse(any(self.token in u for u in urls), urls)
        # A reload in the same tab keeps the token: no second sign-in.
        B.navigate(self.http + "/#/tasks")
        B.wait_for("document.getElementById('main').dataset.view === 'tasks' && "
                   "!document.getElementById('sign-in')", "the tasks view without signing in")
        # The refused requests before signing in are the only errors the browser saw.
        errors = [e for e in B.page_errors() if "status of 401" not in e]
        self.assertEqual(errors, [])
        B.errors.clear()

    def shot(self, name):
        B.screenshot(os.path.join(SHOTS, name))


if __name__ == "__main__":
    if not find_chromium():
        print("browser_test: no chromium installed; skipped")
        sys.exit(77)
    GPUSCHED, SHOTS = sys.argv.pop(1), sys.argv.pop(1)
    os.makedirs(SHOTS, exist_ok=True)
    unittest.main(verbosity=2)
