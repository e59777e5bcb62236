#!/usr/bin/env python3
"""hanashi-cli serve over HTTP: curl checks the SSE framing byte for byte, the OpenAI
fields act as they say, errors come back as OpenAI error JSON with the right status, and
after every bad request (malformed JSON, a 100 MB body, a wrong key, a client that leaves
mid-stream, a full server) the next request succeeds.  Replies are compared with
`hanashi-cli chat` for the same messages and seed: N slots at once give what one request
at a time gives.  TAP output."""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_fixture import Server, Tap, testdata  # noqa: E402

KEY = "test-key-0123456789"
SMALL = testdata("models", "stories260K-f32.gguf")     # context 128: quick replies
LARGER = testdata("models", "quant-llama-v512-q8_0.gguf")  # context 2048: long replies

tap = Tap()
tmp = tempfile.TemporaryDirectory()


def is_error_json(raw, code=None):
    try:
        err = json.loads(raw)["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return (isinstance(err.get("message"), str) and err["message"] != "" and isinstance(err.get("type"), str)
            and "param" in err and "code" in err and (code is None or err["code"] == code))


def chat_body(text, seed, max_tokens=12, **extra):
    return {"model": "any", "messages": [{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": text}],
            "temperature": 0.8, "seed": seed, "max_tokens": max_tokens, **extra}


def cli_chat(model, body, ctx):
    """The same conversation through `hanashi-cli chat` (one request, a fresh context)."""
    path = os.path.join(tmp.name, "messages.json")
    with open(path, "w") as f:
        json.dump(body["messages"], f)
    out = subprocess.run([os.environ["HANASHI_CLI"], "chat", "-m", model, "--messages", path, "-c", str(ctx),
                          "-t", "1", "--temp", str(body["temperature"]), "--seed", str(body["seed"]),
                          "-n", str(body["max_tokens"])], capture_output=True, check=True)
    assert out.stdout.endswith(b"\n")
    return out.stdout[:-1].decode()


def curl(server, path, body, key=KEY, extra=()):
    """POSTs with curl; returns (status, headers text, body bytes)."""
    headers = os.path.join(tmp.name, "headers.txt")
    data = os.path.join(tmp.name, "body.json")
    with open(data, "wb") as f:
        f.write(body if isinstance(body, bytes) else json.dumps(body).encode())
    out = subprocess.run(["curl", "-sS", "-N", "-D", headers, "-H", "Content-Type: application/json",
                          "-H", f"Authorization: Bearer {key}", "--data-binary", "@" + data, *extra,
                          server.url + path], capture_output=True)
    with open(headers, "rb") as f:
        head = f.read().decode("latin-1")
    status = int(head.split(" ", 2)[1]) if head else 0
    return status, head, out.stdout


def compact(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def check_sse(raw, chat):
    """The stream is exactly `data: JSON\\n\\n` events (JSON as the server writes it:
    compact, in this key order) and then `data: [DONE]\\n\\n`; returns the events."""
    if not re.fullmatch(rb"(data: [^\n]+\n\n)+", raw) or not raw.endswith(b"data: [DONE]\n\n"):
        return None, "not a sequence of 'data: ...\\n\\n' events ending in [DONE]"
    lines = [chunk[len(b"data: "):] for chunk in raw.split(b"\n\n")[:-1]]
    events = [json.loads(line) for line in lines[:-1]]
    rebuilt = b"".join(b"data: " + compact(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    if rebuilt != raw:
        return None, "the events are not written as compact JSON"
    ids = {e["id"] for e in events}
    created = {e["created"] for e in events}
    if len(ids) != 1 or len(created) != 1:
        return None, "id or created differs between events"
    obj = "chat.completion.chunk" if chat else "text_completion"
    if any(e["object"] != obj for e in events):
        return None, "wrong object"
    if chat:
        if events[0]["choices"][0]["delta"] != {"role": "assistant", "content": ""}:
            return None, "the first event does not carry the role"
        middle = events[1:-1]
        if any(list(e["choices"][0]["delta"].keys()) != ["content"] or not e["choices"][0]["delta"]["content"]
               or e["choices"][0]["finish_reason"] is not None for e in middle):
            return None, "a middle event is not a non-empty content delta"
        last = events[-1]["choices"][0]
        if last["delta"] != {} or last["finish_reason"] not in ("stop", "length"):
            return None, "the last event does not end the reply"
    return events, ""


def stream_text(events):
    return "".join(e["choices"][0]["delta"].get("content", "") for e in events)


# ---- the command line: bad options are one error line and status 1 -----------------------
for args, name in ((["--port", "70000"], "a port out of range"), (["--host", "not-an-address"], "a host that is no address"),
                   (["--parallel", "0"], "--parallel 0"), (["--bogus", "1"], "an unknown option")):
    out = subprocess.run([os.environ["HANASHI_CLI"], "serve", "-m", SMALL, "--port", "0", *args], capture_output=True,
                         timeout=120)
    lines = out.stderr.decode().splitlines()
    tap.ok(out.returncode == 1 and len(lines) == 1 and lines[0].startswith("hanashi-cli: error: "),
           f"serve with {name}: one error line, status 1", out.stderr)

# ---- one server, four slots --------------------------------------------------------------
with Server(SMALL, "--parallel", "4", "-c", "128", "-t", "2", "--api-key", KEY, "--model-id", "tiny") as srv:
    status, health = srv.json("GET", "/health")
    tap.ok(status == 200 and health["status"] == "ok" and health["slots_total"] == 4, "/health answers without a key",
           health)
    status, models = srv.json("GET", "/v1/models", key=KEY)
    tap.ok(status == 200 and models["object"] == "list" and [m["id"] for m in models["data"]] == ["tiny"],
           "/v1/models lists the model", models)

    for key, name in ((None, "no key"), ("wrong", "a wrong key"), (KEY + "x", "a longer key"), (KEY[:-1], "a prefix")):
        status, _, raw = srv.request("POST", "/v1/chat/completions", chat_body("hi", 1), key=key)
        tap.ok(status == 401 and is_error_json(raw, "invalid_api_key"), f"{name} is refused with 401", raw)

    # a reply equals hanashi-cli chat's for the same messages and seed
    body = chat_body("Tell me a story.", 5)
    status, reply = srv.json("POST", "/v1/chat/completions", body, key=KEY)
    expected = cli_chat(SMALL, body, 128)
    tap.ok(status == 200 and reply["object"] == "chat.completion" and
           reply["choices"][0]["message"] == {"role": "assistant", "content": expected},
           "a reply is the conversation core's reply (hanashi-cli chat, same seed)", f"{reply}\n{expected!r}")
    usage = reply.get("usage", {})
    tap.ok(usage.get("completion_tokens") == 12 and reply["choices"][0]["finish_reason"] == "length" and
           usage.get("total_tokens") == usage.get("prompt_tokens", 0) + 12 and usage.get("prompt_tokens", 0) > 0,
           "usage counts the tokens; max_tokens ends the reply with finish_reason length", reply)

    # the same conversation again: its prefix is in a slot's KV cache
    status, again = srv.json("POST", "/v1/chat/completions", body, key=KEY)
    cached = again.get("usage", {}).get("prompt_tokens_details", {}).get("cached_tokens")
    tap.ok(status == 200 and cached == again["usage"]["prompt_tokens"] - 1,
           "a resent conversation reuses the KV cells of its prefix", again.get("usage"))
    tap.ok(again["choices"][0]["message"]["content"] == expected, "and gives the same reply", again)

    # a growing conversation reuses what the first turn evaluated
    grown = dict(body, messages=body["messages"] + [{"role": "assistant", "content": expected},
                                                     {"role": "user", "content": "And then?"}])
    status, turn2 = srv.json("POST", "/v1/chat/completions", grown, key=KEY)
    cached = turn2.get("usage", {}).get("prompt_tokens_details", {}).get("cached_tokens", 0)
    tap.ok(status == 200 and cached >= usage["prompt_tokens"] // 2,
           "a grown conversation reuses its earlier turns", turn2.get("usage"))

    # streaming, through curl: the framing byte for byte
    sbody = dict(chat_body("Tell me a story.", 9), stream=True)
    status, head, raw = curl(srv, "/v1/chat/completions", sbody)
    events, why = check_sse(raw, True)
    tap.ok(status == 200 and re.search(r"(?im)^content-type: text/event-stream", head) is not None and
           events is not None, "a stream is server-sent events: data: {...} then data: [DONE]", f"{why}\n{raw[:600]!r}")
    if events:
        expected = cli_chat(SMALL, sbody, 128)
        tap.ok(stream_text(events) == expected, "the streamed deltas add up to the reply", stream_text(events))
        status, _, raw2 = curl(srv, "/v1/chat/completions", sbody)
        normalise = lambda b: re.sub(rb'"id":"[^"]*","object":"([^"]*)","created":\d+', rb'"id":"","object":"\1","created":0', b)
        tap.ok(normalise(raw2) == normalise(raw), "the same request streams the same bytes (id and time aside)")

    # include_usage: one more event with empty choices and the usage
    status, head, raw = curl(srv, "/v1/chat/completions", dict(sbody, stream_options={"include_usage": True}))
    lines = raw.split(b"\n\n")
    usage_event = json.loads(lines[-3][len(b"data: "):]) if len(lines) >= 3 else {}
    tap.ok(usage_event.get("choices") == [] and usage_event.get("usage", {}).get("completion_tokens") == 12,
           "stream_options.include_usage sends the usage last", raw[-400:])

    # /v1/completions, and a stop string cuts the text where it starts
    cbody = {"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.8, "seed": 3}
    status, comp = srv.json("POST", "/v1/completions", cbody, key=KEY)
    text = comp["choices"][0]["text"] if status == 200 else ""
    tap.ok(status == 200 and comp["object"] == "text_completion" and len(text) > 6, "/v1/completions answers", comp)
    stop = text[3:6]
    status, cut = srv.json("POST", "/v1/completions", dict(cbody, stop=[stop, "never-there"]), key=KEY)
    tap.ok(status == 200 and cut["choices"][0]["text"] == text[:text.index(stop)] and
           cut["choices"][0]["finish_reason"] == "stop", "stop ends the text before the stop string",
           f"{cut}\nstop={stop!r} text={text!r}")
    status, head, raw = curl(srv, "/v1/completions", dict(cbody, stream=True))
    events, why = check_sse(raw, False)
    tap.ok(events is not None and "".join(e["choices"][0]["text"] for e in events) == text and
           events[-1]["choices"][0]["finish_reason"] == "length", "/v1/completions streams", why or raw[-300:])

    # constraints: json_schema through the grammar engine, GBNF, logit_bias
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}, "colour": {"enum": ["red", "green"]}},
              "required": ["ok", "colour"], "additionalProperties": False}
    jbody = chat_body("JSON please", 4, max_tokens=64,
                      response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}})
    status, jr = srv.json("POST", "/v1/chat/completions", jbody, key=KEY)
    try:
        parsed = json.loads(jr["choices"][0]["message"]["content"])
    except (ValueError, KeyError):
        parsed = None
    tap.ok(isinstance(parsed, dict) and set(parsed) == {"ok", "colour"} and isinstance(parsed["ok"], bool) and
           parsed["colour"] in ("red", "green"), "response_format json_schema gives JSON of the schema", jr)
    status, jo = srv.json("POST", "/v1/chat/completions",
                          chat_body("JSON", 2, max_tokens=100, response_format={"type": "json_object"}, top_k=5), key=KEY)
    content = jo["choices"][0]["message"]["content"] if status == 200 else ""
    finished = status == 200 and jo["choices"][0]["finish_reason"] == "stop"
    tap.ok(status == 200 and content.lstrip().startswith("{") and (not finished or isinstance(json.loads(content), dict)),
           "response_format json_object starts an object (and is one when it ends)", jo)
    status, gr = srv.json("POST", "/v1/chat/completions",
                          chat_body("yes or no?", 8, grammar='root ::= "yes" | "no"', min_p=0.05, typical_p=0.9,
                                    repeat_penalty=1.1, repeat_last_n=16), key=KEY)
    tap.ok(status == 200 and gr["choices"][0]["message"]["content"] in ("yes", "no"),
           "the grammar extension (GBNF) constrains the reply", gr)
    # (CFG keeps the negative prompt in the same context: a short completion fits 128 cells)
    status, mr = srv.json("POST", "/v1/completions", dict(cbody, mirostat=2, mirostat_tau=4, mirostat_eta=0.2,
                                                          cfg_negative_prompt="Sad", cfg_scale=1.5, max_tokens=8),
                          key=KEY)
    tap.ok(status == 200 and mr["usage"]["completion_tokens"] > 0, "mirostat and CFG are accepted", mr)
    status, plain = srv.json("POST", "/v1/completions", dict(cbody, mirostat=2, mirostat_tau=4, mirostat_eta=0.2,
                                                             max_tokens=8), key=KEY)
    tap.ok(status == 200 and plain["choices"][0]["text"] != mr["choices"][0]["text"], "CFG changes the text",
           f"{plain}\n{mr}")
    banned = {str(t): -100 for t in range(512) if t not in (1, 2)}
    # every token but 1 and 2 banned: the reply can only be made of those two (or end)
    status, lb = srv.json("POST", "/v1/completions", dict(cbody, logit_bias=banned, max_tokens=4), key=KEY)
    tap.ok(status == 200 and lb["usage"]["completion_tokens"] >= 1, "logit_bias is applied", lb)

    # requests that are wrong: 400 with the field, and the server goes on
    bad = [
        (b'{"messages": [', None, "malformed JSON"),
        (b'[1, 2]', None, "a body that is not an object"),
        (chat_body("x", 1, n=2), "n", "n = 2"),
        (chat_body("x", 1, temperature="hot"), "temperature", "a temperature that is not a number"),
        (chat_body("x", 1, top_k=-3), "top_k", "top_k out of range"),
        (chat_body("x", 1, stop=7), "stop", "a stop that is not a string"),
        (chat_body("x", 1, logit_bias={"99999": 1}), "logit_bias", "a logit_bias token out of range"),
        (chat_body("x", 1, max_tokens=0), "max_tokens", "max_tokens 0"),
        (chat_body("x", 1, response_format={"type": "xml"}), "response_format", "an unknown response_format"),
        (chat_body("x", 1, grammar="root ::= ("), None, "a grammar that does not parse"),
        ({"messages": []}, "messages", "no messages"),
        ({"messages": [{"role": "user", "content": "x" * 5000}]}, None, "a prompt longer than the context"),
    ]
    for payload, param, name in bad:
        status, _, raw = srv.request("POST", "/v1/chat/completions", payload if isinstance(payload, bytes) else payload,
                                     key=KEY)
        good = status == 400 and is_error_json(raw) and (param is None or json.loads(raw)["error"]["param"] == param)
        tap.ok(good, f"{name}: 400 with an error JSON", raw)
    status, _, raw = srv.request("GET", "/v1/nothing", key=KEY)
    tap.ok(status == 404 and is_error_json(raw), "an unknown path: 404", raw)
    status, _, raw = srv.request("GET", "/v1/chat/completions", key=KEY)
    tap.ok(status == 405 and is_error_json(raw), "GET on a POST endpoint: 405", raw)

    # 100 MB: refused from its Content-Length, without reading it
    big = os.path.join(tmp.name, "big.json")
    with open(big, "wb") as f:
        f.truncate(100 * 1024 * 1024)
    headers = os.path.join(tmp.name, "big-headers.txt")
    started = time.monotonic()
    out = subprocess.run(["curl", "-sS", "-D", headers, "-H", f"Authorization: Bearer {KEY}", "-H",
                          "Content-Type: application/json", "--data-binary", "@" + big,
                          srv.url + "/v1/chat/completions"], capture_output=True)
    with open(headers, "rb") as f:
        head = f.read().decode("latin-1")
    tap.ok(head.startswith("HTTP/1.1 413") and is_error_json(out.stdout, "request_too_large"),
           f"a 100 MB body: 413 with an error JSON ({time.monotonic() - started:.2f} s)", head + out.stdout.decode())

    # after all that, a request still succeeds
    status, ok = srv.json("POST", "/v1/chat/completions", body, key=KEY)
    tap.ok(status == 200 and ok["choices"][0]["message"]["content"] == cli_chat(SMALL, body, 128),
           "the server keeps serving after the bad requests", ok)

    # four clients at once, four slots: each reply is what one request alone gives
    prompts = [("Tell me about a cat.", 11), ("Tell me about a dog.", 12), ("A bird sang.", 13), ("The sun.", 14)]
    results = [None] * len(prompts)

    def worker(i):
        results[i] = srv.json("POST", "/v1/chat/completions", chat_body(prompts[i][0], prompts[i][1], max_tokens=24),
                              key=KEY)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, (text, seed) in enumerate(prompts):
        want = cli_chat(SMALL, chat_body(text, seed, max_tokens=24), 128)
        status, r = results[i]
        tap.ok(status == 200 and r["choices"][0]["message"]["content"] == want,
               f"concurrent request {i} (seed {seed}) gives the one-at-a-time reply", f"{r}\n{want!r}")
    status, health = srv.json("GET", "/health")
    tap.ok(health["slots_idle"] == 4 and health["generations_cancelled"] == 0, "every slot is idle again", health)

# ---- one slot, no queue: busy, a client that leaves, too many connections ----------------
with Server(LARGER, "--parallel", "1", "-c", "2048", "-t", "2", "--max-queue", "0",
            "--max-connections", "4") as srv:
    long_body = json.dumps({"messages": [{"role": "user", "content": "Go on and on."}], "max_tokens": 2000,
                            "temperature": 1.0, "seed": 1, "stream": True}).encode()
    sock = socket.create_connection(("127.0.0.1", srv.port))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(long_body)).encode() + b"\r\n\r\n" + long_body)
    received = b""
    while received.count(b"data: ") < 3:
        chunk = sock.recv(4096)
        if not chunk:
            break
        received += chunk
    tap.ok(b"200 OK" in received and received.count(b"data: ") >= 3, "a long stream starts", received[:300])

    status, headers, raw = srv.request("POST", "/v1/chat/completions",
                                       {"messages": [{"role": "user", "content": "x"}], "max_tokens": 2})
    tap.ok(status == 503 and is_error_json(raw, "server_busy") and headers.get("Retry-After") == "1",
           "a request while the only slot is busy and no queue is allowed: 503", raw)

    sock.close()  # the client leaves mid-stream
    deadline = time.monotonic() + 120
    health = {}
    while time.monotonic() < deadline:
        status, health = srv.json("GET", "/health")
        if health.get("generations_cancelled") == 1 and health.get("slots_idle") == 1:
            break
        time.sleep(0.05)
    tap.ok(health.get("generations_cancelled") == 1 and health.get("slots_idle") == 1,
           "a client that leaves mid-stream cancels its generation", health)
    status, reply = srv.json("POST", "/v1/chat/completions",
                             {"messages": [{"role": "user", "content": "x"}], "max_tokens": 3})
    tap.ok(status == 200 and reply["usage"]["completion_tokens"] == 3, "and the next request succeeds", reply)

    # connections: four open ones are the limit; the fifth is answered 503 and closed
    idle = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(4)]
    time.sleep(0.2)
    status, _, raw = srv.request("GET", "/v1/models")
    tap.ok(status == 503 and is_error_json(raw, "server_busy"), "a connection over --max-connections: 503", raw)
    for s in idle:
        s.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(0.1)
        try:
            status, _, raw = srv.request("GET", "/v1/models")
        except (ConnectionError, OSError):
            continue
        if status == 200:
            break
    tap.ok(status == 200, "closed connections free their places", raw)

# ---- one batch: concurrent requests decoded together equal the same ones sequentially ----
# A quantized model, whose batched rows would go through other kernels than a lone one
# unless each row's kernels are fixed (HnBatch.sampled); requests of different lengths,
# seeds and samplers that arrive at different times, streamed and not.
with Server(LARGER, "--parallel", "4", "-c", "256", "-t", "2") as srv:
    bodies = [chat_body("Tell me about the sea and the ships on it.", 21, max_tokens=150),
              dict(chat_body("Hello.", 22, max_tokens=16), temperature=0.0),
              dict(chat_body("A long story about a small mouse who found a key.", 23, max_tokens=32), top_k=20,
                   presence_penalty=0.5),
              dict(chat_body("Why?", 24, max_tokens=24), stream=True)]

    def reply_text(status, raw):
        if status != 200:
            return None
        if raw.startswith(b"data: "):
            text = ""
            for event in raw.split(b"\n\n"):
                if event.startswith(b"data: {"):
                    delta = json.loads(event[6:])["choices"][0]["delta"]
                    text += delta.get("content") or ""
            return text
        return json.loads(raw)["choices"][0]["message"]["content"]

    def one(body):
        status, _, raw = srv.request("POST", "/v1/chat/completions", json.dumps(body).encode(), key=None)
        return reply_text(status, raw)

    concurrent = [None] * len(bodies)

    def client(i):
        time.sleep(0.03 * i)  # they join while the first one is generating
        concurrent[i] = one(bodies[i])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sequential = [one(b) for b in bodies]
    for i, body in enumerate(bodies):
        tap.ok(concurrent[i] is not None and concurrent[i] == sequential[i],
               f"batched request {i} (seed {body['seed']}) equals the same request sent alone",
               f"{concurrent[i]!r}\n{sequential[i]!r}")
    status, health = srv.json("GET", "/health")
    tap.ok(health["slots_idle"] == 4 and health["generations_finished"] == 2 * len(bodies),
           "every batched request finished", health)
    plain = dict(bodies[0])
    tap.ok(sequential[0] == cli_chat(LARGER, plain, 256), "and equals hanashi-cli chat", sequential[0])

tap.done()
