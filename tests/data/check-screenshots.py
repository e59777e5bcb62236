#!/usr/bin/env python3
"""The metainfo's screenshots are files in this repository (data/screenshots/, made by the
GUI tests' screenshot run), referenced by their raw address on the project's homepage
repository, with the width and height the PNG really has."""
import os
import struct
import sys
import xml.etree.ElementTree as ET

srcdir = sys.argv[1]
tree = ET.parse(os.path.join(srcdir, "data", "io.github.hanashi.Hanashi.metainfo.xml.in"))
root = tree.getroot()
homepage = root.find("url[@type='homepage']").text.rstrip("/")
assert homepage.startswith("https://github.com/"), homepage
raw_prefix = homepage.replace("https://github.com/", "https://raw.githubusercontent.com/", 1) + "/main/"

errors = []
screenshots = root.findall("screenshots/screenshot")
if not screenshots:
    errors.append("no screenshots")
if len([s for s in screenshots if s.get("type") == "default"]) != 1:
    errors.append("exactly one screenshot must be the default")
for shot in screenshots:
    if shot.find("caption") is None or not shot.find("caption").text.strip():
        errors.append("a screenshot without a caption")
    for image in shot.findall("image"):
        url = image.text.strip()
        if not url.startswith(raw_prefix):
            errors.append(f"{url} is not under {raw_prefix}")
            continue
        path = os.path.join(srcdir, url[len(raw_prefix):])
        if not os.path.isfile(path):
            errors.append(f"{url}: {path} is not in the repository")
            continue
        with open(path, "rb") as f:
            head = f.read(24)
        if head[:8] != b"\x89PNG\r\n\x1a\n":
            errors.append(f"{path} is not a PNG")
            continue
        width, height = struct.unpack(">II", head[16:24])
        if (str(width), str(height)) != (image.get("width"), image.get("height")):
            errors.append(f"{path} is {width}x{height}, the metainfo says {image.get('width')}x{image.get('height')}")
for e in errors:
    print(e)
sys.exit(1 if errors else 0)
