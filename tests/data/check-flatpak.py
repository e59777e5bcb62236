#!/usr/bin/env python3
"""Checks the Flatpak manifest: it parses, names the app id and the command meson
installs, asks only for the permissions the app needs, and pins every source."""
import json
import os
import re
import sys

srcdir = sys.argv[1]
manifest_path = os.path.join(srcdir, "flatpak", "io.github.hanashi.Hanashi.json")
with open(manifest_path, encoding="utf-8") as f:
    manifest = json.load(f)

errors = []
def check(cond, message):
    if not cond:
        errors.append(message)

check(manifest.get("id", manifest.get("app-id")) == "io.github.hanashi.Hanashi", "app id is not io.github.hanashi.Hanashi")
check(manifest.get("command") == "hanashi", "command is not hanashi (the binary meson installs)")
check(manifest.get("runtime") == "org.gnome.Platform", "runtime is not org.gnome.Platform")
check(manifest.get("sdk") == "org.gnome.Sdk", "sdk is not org.gnome.Sdk")
try:
    check(int(str(manifest.get("runtime-version"))) >= 50, "runtime-version is older than 50 (the current GNOME runtime)")
except ValueError:
    errors.append("runtime-version is not a number")

allowed = {"--share=ipc", "--socket=fallback-x11", "--socket=wayland", "--device=dri", "--share=network"}
for arg in manifest.get("finish-args", []):
    check(arg in allowed, f"finish-arg {arg} grants more than the app needs")
check("--share=network" in manifest.get("finish-args", []), "model downloads need --share=network")
check(not any(a.startswith("--filesystem") for a in manifest.get("finish-args", [])), "files must go through the portal")

# meson installs the binary named in meson.build; the manifest's command must match it.
with open(os.path.join(srcdir, "app", "meson.build"), encoding="utf-8") as f:
    check(re.search(r"executable\('hanashi'", f.read()) is not None, "app/meson.build does not build 'hanashi'")

def check_source(module, source):
    kind = source.get("type")
    name = module.get("name", "?")
    if kind == "archive" or kind == "file":
        check(re.fullmatch(r"[0-9a-f]{64}", source.get("sha256", "")) is not None, f"{name}: {kind} source without sha256")
        check(source.get("url", "").startswith("https://"), f"{name}: {kind} source is not https")
    elif kind == "git":
        check(re.fullmatch(r"[0-9a-f]{40}", source.get("commit", "")) is not None, f"{name}: git source without a commit")
        check(source.get("url", "").startswith("https://"), f"{name}: git source is not https")
    elif kind == "dir":
        path = os.path.normpath(os.path.join(srcdir, "flatpak", source.get("path", "")))
        check(path == os.path.normpath(srcdir) or path.startswith(os.path.normpath(srcdir) + os.sep), f"{name}: dir source outside the repository")
    else:
        errors.append(f"{name}: unknown source type {kind!r}")

modules = manifest.get("modules", [])
check(len(modules) > 0 and modules[-1].get("name") == "hanashi", "the last module must be hanashi")
for module in modules:
    if isinstance(module, str):
        errors.append(f"module {module} is an external file, not pinned here")
        continue
    check(len(module.get("sources", [])) > 0, f"{module.get('name')}: no sources")
    for source in module.get("sources", []):
        check_source(module, source)
    if module.get("name") == "hanashi":
        check(module.get("buildsystem") == "meson", "hanashi must build with meson")

for e in errors:
    print(e)
sys.exit(1 if errors else 0)
