#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Checks GtkBuilder files against the GObject introspection data of a GTK and libadwaita
that cannot be run here: every class named in an <object> (and a template's parent) exists,
and every <property> and breakpoint <setter> names a property of that class, its ancestors
or its interfaces.  tools/check-new-adw runs it on the files only the newer libadwaita
reads, with the .gir files of the sysroot it compiled against.

    check-ui-properties.py GIRDIR FILE.ui[:TEMPLATE-PARENT] ...

TEMPLATE-PARENT is the class a template without a parent attribute derives from there.
The app's own classes (Hanashi*) are not in the .gir files; their properties are skipped.
"""
import os
import sys
import xml.etree.ElementTree as ET

GIR = "{http://www.gtk.org/introspection/core/1.0}"
GLIB = "{http://www.gtk.org/introspection/glib/1.0}"


def load_types(girdir):
    """type name (AdwNavigationSplitView) -> (namespace, element); and Ns.Name -> type name."""
    by_type, by_qualified = {}, {}
    for name in os.listdir(girdir):
        if not name.endswith(".gir"):
            continue
        root = ET.parse(os.path.join(girdir, name)).getroot()
        for ns in root.findall(GIR + "namespace"):
            ns_name = ns.get("name")
            for kind in ("class", "interface"):
                for el in ns.findall(GIR + kind):
                    type_name = el.get(GLIB + "type-name")
                    if type_name:
                        by_type[type_name] = (ns_name, el)
                        by_qualified[f"{ns_name}.{el.get('name')}"] = type_name
    return by_type, by_qualified


def properties_of(type_name, by_type, by_qualified, seen=None):
    seen = seen if seen is not None else set()
    if type_name in seen or type_name not in by_type:
        return set()
    seen.add(type_name)
    ns, el = by_type[type_name]
    props = {p.get("name") for p in el.findall(GIR + "property")}
    related = [el.get("parent")] if el.get("parent") else []
    related += [i.get("name") for i in el.findall(GIR + "implements")]
    related += [i.get("name") for i in el.findall(GIR + "prerequisite")]
    for other in related:
        qualified = other if "." in other else f"{ns}.{other}"
        if qualified in by_qualified:
            props |= properties_of(by_qualified[qualified], by_type, by_qualified, seen)
    return props


def main():
    girdir, files = sys.argv[1], sys.argv[2:]
    by_type, by_qualified = load_types(girdir)
    errors = []
    for spec in files:
        path, _, template_parent = spec.partition(":")
        root = ET.parse(path).getroot()
        classes = {}  # id -> class, for the setters
        elements = []
        for el in root.iter():
            if el.tag == "object":
                cls = el.get("class")
                elements.append((el, cls))
                if el.get("id"):
                    classes[el.get("id")] = cls
            elif el.tag == "template":
                cls = el.get("parent") or template_parent
                if not cls:
                    errors.append(f"{path}: template {el.get('class')} without a parent class to check")
                    continue
                elements.append((el, cls))
        for el, cls in elements:
            if cls.startswith("Hanashi"):
                continue
            if cls not in by_type:
                errors.append(f"{path}: no class {cls} in {girdir}")
                continue
            props = properties_of(cls, by_type, by_qualified)
            for prop in el.findall("property"):
                if prop.get("name").replace("_", "-") not in props:
                    errors.append(f"{path}: {cls} has no property \"{prop.get('name')}\"")
            for setter in el.findall("setter"):
                target = classes.get(setter.get("object"))
                if target is None:
                    errors.append(f"{path}: a setter names the unknown object \"{setter.get('object')}\"")
                elif not target.startswith("Hanashi") and \
                        setter.get("property") not in properties_of(target, by_type, by_qualified):
                    errors.append(f"{path}: {target} has no property \"{setter.get('property')}\" (a setter)")
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
