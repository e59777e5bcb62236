#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""The window has two templates: data/ui/hanashi-window.ui (libadwaita 1.2 to 1.3: AdwLeaflet
and AdwFlap) and data/ui/hanashi-window-split.ui (1.4 and newer: split views, breakpoints,
a toolbar view).  Only the frame differs (docs/gui.md, "Two libadwaitas").  This fails
when they drift apart: the shared parts (the header's contents, the loading bar, the
empty page and the chat page, the main menu) must be identical, every template child the
C code binds must exist in the template that binds it, and each frame uses only its own
libadwaita's containers."""
import os
import re
import sys
import xml.etree.ElementTree as ET

srcdir = sys.argv[1]
old_path = os.path.join(srcdir, "data", "ui", "hanashi-window.ui")
split_path = os.path.join(srcdir, "data", "ui", "hanashi-window-split.ui")
window_c = open(os.path.join(srcdir, "app", "hanashi-window.c"), encoding="utf-8").read()

errors = []


def by_id(root):
    return {el.get("id"): el for el in root.iter() if el.get("id")}


def canonical(el):
    """The element with whitespace and comments left out (glib-compile-resources strips
    blanks too), as text to compare."""
    copy = ET.fromstring(ET.tostring(el))
    for node in copy.iter():
        node.text = node.text.strip() if node.text and node.text.strip() else None
        node.tail = None
    return ET.tostring(copy, encoding="unicode")


old = ET.parse(old_path).getroot()
split = ET.parse(split_path).getroot()
old_ids, split_ids = by_id(old), by_id(split)

shared = ["primary_menu", "status_box", "model_button", "panel_button", "load_progress", "main_stack"]
for ident in shared:
    if ident not in old_ids or ident not in split_ids:
        errors.append(f"\"{ident}\" must be in both window templates")
    elif canonical(old_ids[ident]) != canonical(split_ids[ident]):
        errors.append(f"\"{ident}\" differs between hanashi-window.ui and hanashi-window-split.ui: "
                      "change both the same way")

# Template properties of the window itself (title, sizes) are the same too.
old_template, split_template = old.find("template"), split.find("template")
for template, name in ((old_template, "hanashi-window.ui"), (split_template, "hanashi-window-split.ui")):
    if template is None or template.get("class") != "HanashiWindow" or template.get("parent") != "AdwApplicationWindow":
        errors.append(f"{name}: the template must be HanashiWindow, an AdwApplicationWindow")
if old_template is not None and split_template is not None:
    props = lambda t: sorted(canonical(p) for p in t.findall("property") if p.get("name") != "content")
    if props(old_template) != props(split_template):
        errors.append("the window's own properties differ between the two templates")

# The template children bound in C: the frame's own in its #if branch, the rest in both.
split_block = re.search(r"#if HANASHI_WINDOW_SPLIT_VIEWS\s*\n\s*gtk_widget_class_set_template_from_resource.*?#else(.*?)#endif",
                        window_c, re.S)
if split_block is None:
    errors.append("app/hanashi-window.c: no #if HANASHI_WINDOW_SPLIT_VIEWS block choosing the template")
else:
    bound_re = r"gtk_widget_class_bind_template_child \(widget_class, HanashiWindow, (\w+)\)"
    split_only = set(re.findall(bound_re, split_block.group(0).split("#else")[0]))
    old_only = set(re.findall(bound_re, split_block.group(1)))
    everywhere = set(re.findall(bound_re, window_c)) - split_only - old_only
    for ident in sorted(split_only | everywhere):
        if ident not in split_ids:
            errors.append(f"hanashi-window-split.ui has no \"{ident}\", which app/hanashi-window.c binds")
    for ident in sorted(old_only | everywhere):
        if ident not in old_ids:
            errors.append(f"hanashi-window.ui has no \"{ident}\", which app/hanashi-window.c binds")

old_classes = {el.get("class") for el in old.iter("object")}
split_classes = {el.get("class") for el in split.iter("object")}
for cls in ("AdwLeaflet", "AdwLeafletPage", "AdwFlap"):
    if cls in split_classes:
        errors.append(f"hanashi-window-split.ui uses {cls}, deprecated in libadwaita 1.4")
for cls in ("AdwNavigationSplitView", "AdwNavigationPage", "AdwOverlaySplitView", "AdwToolbarView", "AdwBreakpoint"):
    if cls in old_classes:
        errors.append(f"hanashi-window.ui uses {cls}, which libadwaita 1.2 does not have")
    if cls not in split_classes:
        errors.append(f"hanashi-window-split.ui does not use {cls}")

for e in errors:
    print(e)
sys.exit(1 if errors else 0)
