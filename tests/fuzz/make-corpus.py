#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into OUT/<target>/.

Small seeds are made here (minimal valid GGUF and session files, in the formats of
docs/engine.md and docs/sessions.md); the rest are cut from the shared test data in place
(chat templates, vocabulary test strings, the shipped grammars), so nothing of it is copied
into the repository.  Usage: make-corpus.py OUT TESTDATA_DIR SOURCE_DIR
"""
import glob
import json
import os
import struct
import sys

out, testdata, source = sys.argv[1], sys.argv[2], sys.argv[3]


def put(target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# ---- GGUF: version 3, a few key/value pairs of every type, a small vocabulary, tensors ----
def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return gstr(key) + struct.pack("<I", vtype) + payload


T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64 = 4, 5, 6, 7, 8, 9, 10


def arr(elem_type, items, pack):
    return struct.pack("<IQ", elem_type, len(items)) + b"".join(pack(x) for x in items)


def gguf(kvs, tensors, align=32):
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    data = b""
    infos = b""
    for name, dims, gtype, nbytes in tensors:
        infos += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", gtype, len(data))
        data += b"\x01" * nbytes
        data += b"\x00" * ((-len(data)) % align)
    blob = head + infos
    blob += b"\x00" * ((-len(blob)) % align)
    return blob + data


tokens = ["<unk>", "<s>", "</s>", "<0x0A>", "\u2581", "a", "b", "\u2581a", "ab", "<|im_start|>", "<|im_end|>"]
spm_kvs = [
    kv("general.architecture", T_STR, gstr("llama")),
    kv("general.name", T_STR, gstr("seed")),
    kv("llama.context_length", T_U32, struct.pack("<I", 64)),
    kv("llama.embedding_length", T_U32, struct.pack("<I", 8)),
    kv("llama.block_count", T_U32, struct.pack("<I", 1)),
    kv("llama.attention.head_count", T_U32, struct.pack("<I", 2)),
    kv("llama.rope.freq_base", T_F32, struct.pack("<f", 10000.0)),
    kv("tokenizer.ggml.model", T_STR, gstr("llama")),
    kv("tokenizer.ggml.tokens", T_ARR, arr(T_STR, tokens, gstr)),
    kv("tokenizer.ggml.scores", T_ARR, arr(T_F32, [0.0, 0, 0, 0, -1, -2, -2, -1.5, -1, 0, 0], lambda x: struct.pack("<f", x))),
    kv("tokenizer.ggml.token_type", T_ARR, arr(T_I32, [2, 3, 3, 6, 1, 1, 1, 1, 1, 3, 3], lambda x: struct.pack("<i", x))),
    kv("tokenizer.ggml.add_bos_token", T_BOOL, b"\x01"),
    kv("tokenizer.chat_template", T_STR, gstr("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")),
]
put("gguf", "spm-vocab.gguf", gguf(spm_kvs, [("token_embd.weight", [8, 11], 0, 8 * 11 * 4)]))
bpe_kvs = [
    kv("general.architecture", T_STR, gstr("qwen2")),
    kv("tokenizer.ggml.model", T_STR, gstr("gpt2")),
    kv("tokenizer.ggml.pre", T_STR, gstr("qwen2")),
    kv("tokenizer.ggml.tokens", T_ARR, arr(T_STR, ["a", "b", "\u0120", "ab", "\u0120a", "<|endoftext|>"], gstr)),
    kv("tokenizer.ggml.merges", T_ARR, arr(T_STR, ["a b", "\u0120 a"], gstr)),
    kv("tokenizer.ggml.eos_token_id", T_U32, struct.pack("<I", 5)),
    kv("general.file_type", T_U64, struct.pack("<Q", 7)),
]
put("gguf", "bpe-vocab.gguf", gguf(bpe_kvs, [("output_norm.weight", [8], 0, 32), ("blk.0.attn_q.weight", [32, 2], 8, 68)]))
put("gguf", "empty.gguf", gguf([], []))
for path in sorted(glob.glob(os.path.join(testdata, "models", "*.gguf")))[:3]:
    with open(path, "rb") as f:
        put("gguf", "head-" + os.path.basename(path), f.read(2048))


# ---- session files (the fuzz-session target expects these settings) ----
def fnv1a(data, h=0xcbf29ce484222325):
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def session(n_tokens, n_layer=3, k=8, v=12, fingerprint=0x1234abcd5678ef00, rows_from=0):
    payload = b"".join(struct.pack("<i", 100 + i) for i in range(n_tokens))
    for layer in range(n_layer):
        payload += bytes((layer * 7 + i) & 0xFF for i in range(n_tokens * k * 2))
        payload += bytes((layer * 5 + i) & 0xFF for i in range(n_tokens * v * 2))
    head = b"HNSESSN\x00" + struct.pack("<II", 2, 88) + struct.pack("<Q", fingerprint)
    head += struct.pack("<IIIIIff", 1, n_layer, k, v, 0, 10000.0, 1.0)
    head += struct.pack("<IQQII", n_tokens, len(payload), fnv1a(payload), rows_from, 0)
    return head + struct.pack("<Q", fnv1a(head)) + payload


put("session", "three-tokens.hnsession", session(3))
put("session", "empty.hnsession", session(0))
put("session", "other-model.hnsession", session(2, fingerprint=1))
put("session", "window-rows-from.hnsession", session(5, rows_from=2))

# ---- chat templates and vocabulary strings, from the test data ----
for path in sorted(glob.glob(os.path.join(testdata, "templates", "*.json"))):
    with open(path) as f:
        t = json.load(f)
    if "template" in t:
        put("chat-template", os.path.basename(path)[:-5] + ".jinja", t["template"])
for path in sorted(glob.glob(os.path.join(testdata, "vocab", "*.inp"))):
    with open(path, encoding="utf-8") as f:
        strings = f.read().split("\n__ggml_vocab_test__\n")
    for i, s in enumerate(strings[:12]):
        put("tokenizer", "%s-%d.txt" % (os.path.basename(path)[:-4], i), s)

# ---- grammars: the shipped ones ----
for path in sorted(glob.glob(os.path.join(source, "data", "grammars", "*.gbnf"))):
    with open(path, "rb") as f:
        put("gbnf", os.path.basename(path), f.read())
