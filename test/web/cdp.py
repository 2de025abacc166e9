"""Headless Chromium driven over the DevTools protocol (a websocket), Python stdlib only.
Collects every JavaScript exception, console error and browser log error of the page so a
test can fail on them."""

import base64
import http.client
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time

from devcluster import wait_or_kill

CHROMIUM_CANDIDATES = ["chromium", "chromium-browser", "google-chrome"]


def find_chromium():
    for name in [os.environ.get("GPUSCHED_CHROMIUM", "")] + CHROMIUM_CANDIDATES:
        path = name and shutil.which(name)
        if path:
            return path
    return None


class WebSocket:
    """A client websocket (RFC 6455): text frames out (masked), frames in."""

    def __init__(self, host, port, path):
        self.sock = socket.create_connection((host, port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n" % (path, host, port, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("websocket handshake: connection closed")
            head += chunk
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise ConnectionError("websocket handshake refused: %r" % head)

    def _read(self, n):
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("websocket closed")
            out += chunk
        return out

    def send(self, text):
        data = text.encode()
        head = bytes([0x81])
        if len(data) < 126:
            head += bytes([0x80 | len(data)])
        elif len(data) < 65536:
            head += bytes([0x80 | 126]) + struct.pack("!H", len(data))
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", len(data))
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            payload = self._read(n)
            opcode = b0 & 0x0F
            if opcode == 8:
                raise ConnectionError("websocket closed by the browser")
            if opcode in (9, 10):  # ping, pong: Chromium does not ping its clients
                continue
            message += payload
            if b0 & 0x80:
                return message.decode()

    def close(self):
        self.sock.close()


class Browser:
    """One headless Chromium with one page; `errors` lists what went wrong in the page."""

    def __init__(self):
        self.binary = find_chromium()
        self.profile = tempfile.mkdtemp(prefix="gpusched-chromium-")
        args = [self.binary, "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-extensions", "--disable-default-apps",
                "--no-default-browser-check", "--no-proxy-server", "--hide-scrollbars",
                "--remote-debugging-port=0", "--user-data-dir=" + self.profile,
                "--window-size=1280,800", "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port = self._devtools_port()
        self.ws = WebSocket("127.0.0.1", port, self._page_path(port))
        self.next_id = 0
        self.errors = []
        for domain in ("Page", "Runtime", "Log"):
            self.call(domain + ".enable")

    def _devtools_port(self):
        path = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + 30
        while time.time() < deadline:
            if os.path.exists(path):
                lines = open(path).read().split("\n")
                if lines and lines[0].isdigit():
                    return int(lines[0])
            if self.proc.poll() is not None:
                raise RuntimeError("chromium exited with %d" % self.proc.returncode)
            time.sleep(0.05)
        raise RuntimeError("chromium did not open its DevTools port")

    def _page_path(self, port):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/json/list")
        targets = json.loads(conn.getresponse().read())
        page = next(t for t in targets if t["type"] == "page")
        return "/devtools/page/" + page["id"]

    def _note(self, event):
        method, p = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.errors.append("exception: %s %s" % (
                d.get("text"), d.get("exception", {}).get("description", "")))
        elif method == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
            self.errors.append("console.%s: %s" % (
                p["type"], " ".join(str(a.get("value", a.get("description"))) for a in p["args"])))
        elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
            self.errors.append("log: %s (%s)" % (p["entry"]["text"], p["entry"].get("url", "")))

    def call(self, method, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            self._note(msg)

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("evaluate %s: %s" % (expression, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait_for(self, expression, what, timeout=20):
        """Polls `expression` until it is truthy; returns its value. (A DOM node comes back
        as {}, which Python finds false: test it with !!node.)"""
        deadline = time.time() + timeout
        last = ""
        while time.time() < deadline:
            try:
                value = self.evaluate(expression)
            except RuntimeError as e:  # the page is loading: its elements are not there yet
                value, last = None, str(e)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError("timed out waiting for %s (%s) %s" % (what, expression, last[:300]))

    def viewport(self, width, height, mobile=False):
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=2 if mobile else 1, mobile=mobile)

    def navigate(self, url):
        self.call("Page.navigate", url=url)

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def page_errors(self):
        """Errors seen by the protocol and by the page's own hook (web/errors.js)."""
        self.evaluate("1")  # drain pending events
        hooked = self.evaluate("window.gpuschedErrors || []") or []
        return self.errors + ["page: " + e for e in hooked]

    def close(self):
        try:
            self.call("Browser.close")
        except (ConnectionError, RuntimeError, OSError):
            pass
        wait_or_kill(self.proc, 10)
        self.ws.close()
        shutil.rmtree(self.profile, ignore_errors=True)
