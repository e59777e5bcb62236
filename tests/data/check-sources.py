#!/usr/bin/env python3
"""Rules every source file keeps, so that they cannot quietly come back undone.

- Doors: the app reaches the engine only through engine/glib.  No file in app/ includes a
  header of the GLib-free engine (engine/*.h, engine/jinja/*.h) or of the CLI.
- Every C file starts the same way: its first comment carries the licence line.
- Every app .c file names its log domain (G_LOG_DOMAIN) before its first #include.
- Test seams: the product reads no environment variable of ours but the ones named below,
  each in its one place; those that are test seams are listed in
  tests/support/hanashi-test-seams.h, and no product file carries a scripted backend.

Usage: check-sources.py SOURCE_ROOT
"""
import pathlib
import re
import sys

LICENCE = "SPDX-License-Identifier: GPL-3.0-or-later"
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)

root = pathlib.Path(sys.argv[1])
problems = []

# Doors.  The forbidden names are the engine's own headers, whatever they are called today.
engine_headers = {p.name for d in ("engine", "engine/jinja", "engine/cli") for p in (root / d).glob("*.h")}
allowed = {p.name for p in (root / "engine/glib").glob("*.h")} | {p.name for p in (root / "engine/download").glob("*.h")}
assert engine_headers, "no engine headers found under " + str(root)
for path in sorted((root / "app").rglob("*.[ch]")):
    for name in INCLUDE.findall(path.read_text(encoding="utf-8")):
        base = name.rsplit("/", 1)[-1]
        if base in engine_headers and base not in allowed:
            problems.append(f"{path.relative_to(root)}: includes the engine header {name}; "
                            "the app reaches the engine through engine/glib only")

# Licence line in the first comment of every C file we wrote.
for folder in ("app", "engine", "tests"):
    for path in sorted((root / folder).rglob("*.[ch]")):
        text = path.read_text(encoding="utf-8")
        first = re.match(r"\s*/\*.*?\*/", text, re.S)
        if not first or LICENCE not in first.group(0):
            problems.append(f"{path.relative_to(root)}: the first comment lacks “{LICENCE}”")

# Log domain in every app .c file, before anything that could log.
for path in sorted((root / "app").glob("*.c")):
    text = path.read_text(encoding="utf-8")
    domain = re.search(r'^#define G_LOG_DOMAIN "[a-z-]+"', text, re.M)
    first_include = INCLUDE.search(text)
    if not domain or (first_include and domain.start() > first_include.start()):
        problems.append(f"{path.relative_to(root)}: no #define G_LOG_DOMAIN before the first #include")

# The environment variables the product reads, and where.  Test seams must also be in the
# seams header; the others are settings for people (documented in docs/).
PRODUCT_ENV = {
    "HANASHI_MEM_AVAILABLE_MB": ("engine/hn-memory.c", True),
    "HANASHI_HUB_URL": ("engine/download/hanashi-download.c", True),
    "HANASHI_SIMD": (("engine/hn-cpu.c", "engine/hn-simd.c"), False),
    "HANASHI_DECODE": ("engine/hn-decode-choice.c", False),
    "HANASHI_REGROUP": ("engine/hn-model-regroup.c", False),
    "HANASHI_NOW": ("engine/cli/cli-chat-template.c", False),
    "HANASHI_API_KEY": ("engine/cli/cli-serve.c", False),
    "HANASHI_VULKAN_MEMORY_LIMIT": ("engine/vulkan/hn-vk.c", True),
    "HANASHI_VULKAN_FAIL": ("engine/vulkan/hn-vk.c", True),
}
GETENV = re.compile(r'\b(?:g_)?getenv\s*\(\s*"(HANASHI_[A-Z0-9_]+)"')
seams_header = (root / "tests/support/hanashi-test-seams.h").read_text(encoding="utf-8")
for folder in ("app", "engine"):
    for path in sorted((root / folder).rglob("*.[ch]")):
        rel = str(path.relative_to(root))
        text = path.read_text(encoding="utf-8")
        for name in GETENV.findall(text):
            where, seam = PRODUCT_ENV.get(name, ((), False))
            places = (where,) if isinstance(where, str) else where
            if rel not in places:
                problems.append(f"{rel}: reads {name}, which is not one of the product's documented variables "
                                "(tests/data/check-sources.py) or not read here")
        if re.search(r"\w*scripted_\w+", text):
            problems.append(f"{rel}: has code of a scripted backend; test fakes live in tests/support")
for name, (where, seam) in PRODUCT_ENV.items():
    if seam and name not in seams_header:
        problems.append(f"tests/support/hanashi-test-seams.h: does not list the test seam {name}")

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
