"""Starts `hanashi-cli serve` on a free port for a test and stops it afterwards.

The server prints "serve: listening on http://HOST:PORT" on stderr once it listens
(a contract of hanashi-cli serve); the port is read from that line.
"""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

LISTENING = re.compile(r"serve: listening on http://([^\s]+):(\d+)")


class Server:
    def __init__(self, model, *args, env=None):
        self.cli = os.environ["HANASHI_CLI"]
        cmd = [self.cli, "serve", "-m", model, "--port", "0", *args]
        environ = {**os.environ, **(env or {})}
        if environ.get("ASAN_OPTIONS"):
            # full stacks for leaks, so that tests/lsan.supp can name the frame of
            # libsoup 3.2's known leak of idle connections (g_socket_accept); the
            # default fast unwinder stops at GLib, built without frame pointers
            environ["ASAN_OPTIONS"] += ":fast_unwind_on_malloc=0"
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     env=environ, text=True)
        self.stderr_lines = []
        deadline = time.monotonic() + 120
        self.port = None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.stderr_lines.append(line)
            m = LISTENING.search(line)
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                break
        if self.port is None:
            self.proc.kill()
            raise SystemExit("the server did not start:\n" + "".join(self.stderr_lines) +
                             self.proc.stderr.read())
        # keep draining stderr so that the server never blocks on a full pipe
        self.drain = threading.Thread(target=self._drain, daemon=True)
        self.drain.start()
        self.url = f"http://127.0.0.1:{self.port}"

    def _drain(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)
            sys.stderr.write("server: " + line)

    def request(self, method, path, body=None, key=None, headers=None, timeout=600):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Content-Type": "application/json", **(headers or {})}
        if key is not None:
            h["Authorization"] = "Bearer " + key
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        conn.request(method, path, body=data, headers=h)
        resp = conn.getresponse()
        raw = resp.read()
        conn.close()
        return resp.status, dict(resp.getheaders()), raw

    def json(self, method, path, body=None, key=None):
        status, headers, raw = self.request(method, path, body, key)
        return status, json.loads(raw)

    def stop(self):
        """SIGTERM: the server must exit by itself with status 0 (and, under the
        sanitizers, without leaks)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise SystemExit("the server did not stop on SIGTERM")
        self.drain.join(timeout=10)
        if self.proc.returncode != 0:
            raise SystemExit(f"the server exited with status {self.proc.returncode}:\n" +
                             "".join(self.stderr_lines))

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is None:
            self.stop()
        elif self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def testdata(*parts):
    return os.path.join(os.environ["HANASHI_TESTDATA"], *parts)


class Tap:
    """A minimal TAP writer: one line per check, the plan at the end."""

    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, name, detail=""):
        self.n += 1
        print(("ok" if cond else "not ok") + f" {self.n} - {name}", flush=True)
        if not cond:
            self.failed += 1
            for line in str(detail).splitlines():
                print("# " + line, flush=True)
        return cond

    def done(self):
        print(f"1..{self.n}", flush=True)
        sys.exit(1 if self.failed else 0)
