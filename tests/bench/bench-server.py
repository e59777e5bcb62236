#!/usr/bin/env python3
"""Load on hanashi-cli serve: CLIENTS concurrent streaming clients send REQUESTS chat
requests in all (each a short conversation, max_tokens TOKENS), against --parallel 1 and
--parallel 4 (one batch) at the same thread count.  Prints per run: errors (must be 0: any
is reported and the benchmark exits 1), requests and generated tokens per second, and
the median and 95th percentile of the time to the first streamed token and of the
whole request; then the throughput ratio.  Numbers, not a timed test: nothing asserts
a speed.

Environment: HANASHI_CLI, HANASHI_TESTDATA (set by meson); BENCH_SERVER_MODEL (default
the test data's quant-llama-v512-q8_0.gguf), BENCH_SERVER_CLIENTS (16),
BENCH_SERVER_REQUESTS (200), BENCH_SERVER_TOKENS (32), BENCH_SERVER_THREADS (threads of
the server in all, default: the processors), BENCH_SERVER_RUNS (3: runs of each setting,
interleaved; the ratio is of their medians)."""
import http.client
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from serve_fixture import Server, testdata  # noqa: E402

model = os.environ.get("BENCH_SERVER_MODEL") or testdata("models", "quant-llama-v512-q8_0.gguf")
clients = int(os.environ.get("BENCH_SERVER_CLIENTS", "16"))
requests = int(os.environ.get("BENCH_SERVER_REQUESTS", "200"))
tokens = int(os.environ.get("BENCH_SERVER_TOKENS", "32"))
threads = int(os.environ.get("BENCH_SERVER_THREADS", str(os.cpu_count() or 1)))
runs = int(os.environ.get("BENCH_SERVER_RUNS", "3"))


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def one_request(port, i, out):
    body = json.dumps({"messages": [{"role": "user", "content": f"Tell me story number {i}."}],
                       "max_tokens": tokens, "temperature": 0.8, "seed": i, "stream": True}).encode()
    start = time.monotonic()
    first = None
    n_content = 0
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            out.append(("error", f"HTTP {resp.status}: {resp.read()[:200]!r}"))
            return
        done = False
        for line in resp:
            if not line.startswith(b"data: "):
                continue
            data = line[6:].strip()
            if data == b"[DONE]":
                done = True
                break
            event = json.loads(data)
            if event["choices"] and event["choices"][0]["delta"].get("content"):
                n_content += 1
                if first is None:
                    first = time.monotonic() - start
        if not done:
            out.append(("error", "the stream ended without [DONE]"))
            return
        out.append(("ok", first or 0.0, time.monotonic() - start, n_content))
    except (OSError, http.client.HTTPException, ValueError) as e:
        out.append(("error", repr(e)))
    finally:
        conn.close()


def run(parallel, n_threads):
    with Server(model, "--parallel", str(parallel), "-c", "512", "-t", str(n_threads),
                "--max-queue", str(requests)) as srv:
        # what the server itself counted: tokens generated
        next_index = iter(range(requests))
        lock = threading.Lock()
        results = []

        def client():
            while True:
                with lock:
                    i = next(next_index, None)
                if i is None:
                    return
                one_request(srv.port, i, results)

        start = time.monotonic()
        workers = [threading.Thread(target=client) for _ in range(clients)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        wall = time.monotonic() - start
        status, health = srv.json("GET", "/health")
    oks = [r for r in results if r[0] == "ok"]
    errors = [r for r in results if r[0] == "error"]
    ttft = sorted(r[1] for r in oks)
    total = sorted(r[2] for r in oks)
    pieces = sum(r[3] for r in oks)
    q95 = lambda xs: xs[min(len(xs) - 1, int(0.95 * len(xs)))] if xs else 0.0
    print(f"--parallel {parallel} -t {n_threads}: {len(oks)} of {requests} requests ok, {len(errors)} errors, "
          f"{wall:.2f} s, {len(oks) / wall:.2f} requests/s, {pieces / wall:.1f} streamed tokens/s; "
          f"first token median {statistics.median(ttft) if ttft else 0:.3f} s p95 {q95(ttft):.3f} s; "
          f"request median {statistics.median(total) if total else 0:.3f} s p95 {q95(total):.3f} s; "
          f"server: {health.get('generations_finished')} generations, {health.get('generations_cancelled')} cancelled",
          flush=True)
    for e in errors[:5]:
        print("  error:", e[1], flush=True)
    return len(errors), pieces / wall


print(f"server load: {clients} streaming clients, {requests} requests, max_tokens {tokens}, "
      f"{threads} threads, model {os.path.basename(model)}, {runs} runs each; CPU: {cpu_model()}", flush=True)
# --parallel 4 decodes its four slots in one batch on the same threads as --parallel 1;
# both at -t THREADS and at -t 1 (on a loaded machine a small model's per-layer barrier
# can cost more than a second thread gains), runs interleaved, medians compared
failed = False
for n_threads in sorted({threads, 1}, reverse=True):
    rates = {1: [], 4: []}
    for _ in range(runs):
        for parallel in (1, 4):
            errors, rate = run(parallel, n_threads)
            failed = failed or errors > 0
            rates[parallel].append(rate)
    m1, m4 = statistics.median(rates[1]), statistics.median(rates[4])
    print(f"-t {n_threads}: median streamed tokens/s --parallel 1 {m1:.1f}, --parallel 4 {m4:.1f}; "
          f"throughput --parallel 4 / --parallel 1: {m4 / m1 if m1 else 0:.2f}x", flush=True)
sys.exit(1 if failed else 0)
