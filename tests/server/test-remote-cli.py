#!/usr/bin/env python3
"""The CLI's remote client against our own server: `hanashi-cli generate --remote` and
`chat --remote` talk to `hanashi-cli serve` and must print exactly what `hanashi-cli chat`
prints locally for the same conversation, model, seed and parameters.  Hanashi's extension
fields (top_k, min_p, grammar, CFG...) only reach the server when the client recognises it as
a Hanashi server, so each variant is first checked to change the local reply (otherwise an
equal remote reply would prove nothing).  Wrong keys, unknown models and an unreachable
server are one error line and status 1.  TAP output."""
import json
import os
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_fixture import Server, Tap, testdata  # noqa: E402

CLI = os.environ["HANASHI_CLI"]
KEY = "remote-cli-key-42"
MODEL = testdata("models", "quant-llama-v512-q8_0.gguf")   # context 2048: room for long replies

tap = Tap()
tmp = tempfile.TemporaryDirectory()


def write(name, text):
    path = os.path.join(tmp.name, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def run(args, timeout=300):
    out = subprocess.run([CLI, *args], capture_output=True, timeout=timeout)
    return out.returncode, out.stdout.decode(errors="replace"), out.stderr.decode(errors="replace")


def local(command, args):
    return run([command, "-m", MODEL, "-t", "1", *args])


def remote(command, url, args, key=KEY):
    extra = ["--api-key", key] if key is not None else []
    return run([command, "--remote", url, *extra, *args])


def same(name, local_out, remote_out):
    ok = (local_out[0] == 0 and remote_out[0] == 0 and local_out[1] == remote_out[1] and local_out[1].strip() != "")
    return tap.ok(ok, name, f"local  (status {local_out[0]}): {local_out[1]!r} {local_out[2]}\n"
                            f"remote (status {remote_out[0]}): {remote_out[1]!r} {remote_out[2]}")


def one_error_line(out, name, *words):
    lines = out[2].splitlines()
    ok = (out[0] == 1 and len(lines) >= 1 and lines[-1].startswith("hanashi-cli: error: ")
          and all(w in lines[-1] for w in words))
    return tap.ok(ok, name, f"status {out[0]}, stderr: {out[2]}")


BASE = ["--seed", "11", "--temp", "0.9", "-n", "24"]
messages = write("messages.json", json.dumps([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Name three colours."},
]))
single = write("single.json", json.dumps([{"role": "user", "content": "Once upon a time"}]))
turns = write("turns.txt", "Hello there.\nAnd then what happened?\nThe end?\n")
digits = write("digits.gbnf", 'root ::= [0-9]+ " " [a-z]+\n')
schema = write("schema.json", json.dumps({
    "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}))

# Variants of the sampling: each must change the local reply, and remote must equal local.
VARIANTS = [
    ("top_k 3", ["--top-k", "3"]),
    ("min_p 0.2", ["--min-p", "0.2"]),
    ("typical_p 0.5", ["--typical", "0.5"]),
    ("repeat_penalty 1.5 over 16", ["--repeat-penalty", "1.5", "--repeat-last-n", "16"]),
    ("mirostat 2", ["--mirostat", "2", "--mirostat-tau", "3"]),
    ("a GBNF grammar", ["--grammar-file", digits]),
    ("a JSON schema", ["--json-schema", schema]),
    ("CFG with a negative prompt", ["--cfg-negative-prompt", "colours", "--cfg-scale", "2.5"]),
    ("a stop string", ["--stop", "e"]),
    ("a logit bias", ["--logit-bias", "100=8", "--logit-bias", "101=8"]),
]

with Server(MODEL, "--parallel", "2", "-t", "2", "-c", "1024", "--api-key", KEY) as srv:
    url = srv.url + "/v1"

    # ---- chat: a system prompt and a question, then the variants ----------------------------
    base_local = local("chat", ["--messages", messages, *BASE])
    same("chat --remote equals chat for the same messages and seed", base_local,
         remote("chat", url, ["--messages", messages, *BASE]))
    for name, args in VARIANTS:
        got_local = local("chat", ["--messages", messages, *BASE, *args])
        tap.ok(got_local[0] == 0 and got_local[1] != base_local[1], f"{name} changes the local reply",
               f"{got_local}\nbase: {base_local[1]!r}")
        same(f"chat --remote with {name} equals chat", got_local,
             remote("chat", url, ["--messages", messages, *BASE, *args]))

    # ---- several turns: the server reuses its KV prefix; the replies still match ----------
    same("chat --remote over three turns equals chat", local("chat", ["-f", turns, *BASE]),
         remote("chat", url, ["-f", turns, *BASE]))
    same("chat --remote with --system over three turns equals chat",
         local("chat", ["--system", "Answer in one word.", "-f", turns, *BASE]),
         remote("chat", url, ["--system", "Answer in one word.", "-f", turns, *BASE]))

    # ---- generate: the prompt is one user message (its documented contract) ---------------
    gen_local = local("chat", ["--messages", single, *BASE])
    same("generate --remote equals chat with the prompt as one user message", gen_local,
         remote("generate", url, ["-p", "Once upon a time", *BASE]))
    prompt_file = write("prompt.txt", "Once upon a time")
    same("generate --remote -f FILE equals the same with -p", gen_local,
         remote("generate", url, ["-f", prompt_file, *BASE]))
    for name, args in (VARIANTS[0], VARIANTS[5], VARIANTS[7]):
        same(f"generate --remote with {name} equals chat", local("chat", ["--messages", single, *BASE, *args]),
             remote("generate", url, ["-p", "Once upon a time", *BASE, *args]))
    # greedy: the server's choice equals the local argmax
    same("generate --remote at temperature 0 equals chat",
         local("chat", ["--messages", single, "--temp", "0", "-n", "16"]),
         remote("generate", url, ["-p", "Once upon a time", "--temp", "0", "-n", "16"]))

    # ---- a token that decodes to a NUL byte (<0x00>, id 3 of this vocabulary, forced by a bias):
    # JSON carries it as \u0000 and both the server and the client must keep it
    nul_local = local("chat", ["--messages", single, "--temp", "0", "--logit-bias", "3=100", "-n", "3"])
    tap.ok(nul_local[1] == "\0\0\0\n", "the local reply is three NUL bytes", repr(nul_local))
    same("generate --remote keeps NUL bytes", nul_local,
         remote("generate", url, ["-p", "Once upon a time", "--temp", "0", "--logit-bias", "3=100", "-n", "3"]))

    # ---- the model id: the server's own, and -m naming it --------------------------------
    status, models = srv.json("GET", "/v1/models", key=KEY)
    model_id = models["data"][0]["id"]
    same("generate --remote -m <the server's model id> works",
         gen_local, remote("generate", url, ["-m", model_id, "-p", "Once upon a time", *BASE]))

    # ---- errors: one line, status 1, the server keeps serving --------------------------------
    one_error_line(remote("generate", url, ["-p", "hi", "-n", "4"], key="wrong"),
                   "a wrong key is one error line", "key")
    one_error_line(remote("generate", url, ["-p", "hi", "-n", "4"], key=None),
                   "no key where one is needed is one error line", "key")
    one_error_line(remote("generate", url, ["-m", "no-such-model", "-p", "hi", "-n", "4"]),
                   "an unknown model is one error line that names it", "no-such-model", model_id)
    one_error_line(remote("chat", url, ["--messages", messages, "--logit-bias", "999999=1", "-n", "4"]),
                   "a token id the server does not know: its refusal is the error line", "999999")
    same("after the errors the server still serves", base_local,
         remote("chat", url, ["--messages", messages, *BASE]))

# an unreachable server: a free port nobody listens on
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    dead_port = s.getsockname()[1]
one_error_line(remote("generate", f"http://127.0.0.1:{dead_port}/v1", ["-p", "hi", "-n", "4"]),
               "an unreachable server is one error line", f"127.0.0.1:{dead_port}")

tap.done()
