#!/usr/bin/env python3
"""Rules every source file keeps, so that they cannot quietly come back undone.

- Doors: the app reaches the engine only through engine/glib.  No file in app/ includes a
  header of the GLib-free engine (engine/*.h, engine/jinja/*.h) or of the CLI.
- Every C file starts the same way: its first comment carries the licence line.
- Every app .c file names its log domain (G_LOG_DOMAIN) before its first #include.

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

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
