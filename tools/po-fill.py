#!/usr/bin/env python3
"""Minimal PO reader/writer used to keep the translation catalogs in sync.

  tools/po-fill.py list POT            print every (context, msgid) as JSON lines
  tools/po-fill.py fill POT PO TABLE   write PO from POT with msgstrs from TABLE (JSON:
                                       list of [context or null, msgid, msgstr]); entries
                                       missing from TABLE keep the PO's current msgstr.
"""
import json
import re
import sys


def unquote(s):
    return json.loads(s) if s.startswith('"') else s


def parse(path):
    entries, cur, field = [], None, None
    header_comments = []
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not line.strip():
                if cur is not None:
                    entries.append(cur)
                cur, field = None, None
                continue
            if cur is None:
                cur = {"comments": [], "msgctxt": None, "msgid": "", "msgstr": ""}
            if line.startswith("#"):
                cur["comments"].append(line)
                continue
            m = re.match(r'^(msgctxt|msgid|msgstr)\s+(".*")$', line)
            if m:
                field = m.group(1)
                cur[field] = unquote(m.group(2))
            elif line.startswith('"') and field:
                cur[field] = (cur[field] or "") + unquote(line)
    if cur is not None:
        entries.append(cur)
    return entries


def quote(s):
    return json.dumps(s, ensure_ascii=False)


def write(path, entries):
    with open(path, "w", encoding="utf-8") as f:
        for e in entries:
            for c in e["comments"]:
                if c.startswith("#, fuzzy") and e["msgid"]:
                    continue
                f.write(c + "\n")
            if e["msgctxt"] is not None:
                f.write("msgctxt " + quote(e["msgctxt"]) + "\n")
            f.write("msgid " + quote(e["msgid"]) + "\n")
            if e["msgid"] == "":
                # the header: one field per line, as gettext's tools write it
                f.write('msgstr ""\n')
                for field in e["msgstr"].splitlines(keepends=True):
                    f.write(quote(field) + "\n")
                f.write("\n")
            else:
                f.write("msgstr " + quote(e["msgstr"]) + "\n\n")


def main():
    if sys.argv[1] == "list":
        for e in parse(sys.argv[2]):
            if e["msgid"]:
                print(json.dumps([e["msgctxt"], e["msgid"]], ensure_ascii=False))
        return
    if sys.argv[1] == "fill":
        pot, po, table = sys.argv[2], sys.argv[3], sys.argv[4]
        lang_header = None
        try:
            old = {(e["msgctxt"], e["msgid"]): e["msgstr"] for e in parse(po)}
            lang_header = old.get((None, ""))
        except FileNotFoundError:
            old = {}
        with open(table, encoding="utf-8") as f:
            new = {(c, i): s for c, i, s in json.load(f)}
        out = []
        for e in parse(pot):
            key = (e["msgctxt"], e["msgid"])
            if e["msgid"] == "":
                e["msgstr"] = lang_header or e["msgstr"]
                e["comments"] = [c for c in e["comments"] if not c.startswith("#, fuzzy")]
            else:
                e["msgstr"] = new.get(key, old.get(key, ""))
            out.append(e)
        write(po, out)
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main()
