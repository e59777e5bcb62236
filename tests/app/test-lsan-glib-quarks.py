#!/usr/bin/env python3
"""Checks lsan-glib-quarks.py: it forgives GLib's quark block and nothing else.

Each case runs the wrapper on a stand-in test program that prints a sanitizer report on
stderr and exits as a sanitized program would. Prints TAP.
"""
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
wrapper = os.path.join(here, "lsan-glib-quarks.py")

HEAD = "=================================================================\n==1==ERROR: LeakSanitizer: detected memory leaks\n\n"
QUARKS = ("Direct leak of 16384 byte(s) in 1 object(s) allocated from:\n"
          "    #0 0x7f5bae8b89cf in __interceptor_malloc ../../../../src/libsanitizer/asan/asan_malloc_linux.cpp:69\n"
          "    #1 0x7f5bae6c2658 in g_malloc (/lib/x86_64-linux-gnu/libglib-2.0.so.0+0x5a658)\n\n")
OURS = ("Direct leak of 64 byte(s) in 1 object(s) allocated from:\n"
        "    #0 0x7f5bae8b89cf in __interceptor_malloc ../../../../src/libsanitizer/asan/asan_malloc_linux.cpp:69\n"
        "    #1 0x7f5bae6c2658 in g_malloc (/lib/x86_64-linux-gnu/libglib-2.0.so.0+0x5a658)\n"
        "    #2 0x55d0c0ffee00 in hanashi_chat_view_append ../app/hanashi-chat-view.c:412\n\n")
SAME_SIZE_OURS = QUARKS.replace("\n\n", "\n    #2 0x55d0c0ffee00 in hanashi_store_open ../app/hanashi-store.c:99\n\n")
INDIRECT = QUARKS.replace("Direct leak", "Indirect leak")
TWO_OBJECTS = QUARKS.replace("in 1 object(s)", "in 2 object(s)")
OTHER_LIB = QUARKS.replace("g_malloc (/lib/x86_64-linux-gnu/libglib-2.0.so.0", "g_malloc (/opt/other/libnotglib.so")
SUMMARY = "SUMMARY: AddressSanitizer: 16384 byte(s) leaked in 1 allocation(s).\n"
ASAN_ERROR = "==1==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010\n"

# (name, stderr of the stand-in, its exit (negative = killed by that signal), wrapper passes?)
CASES = [
    ("clean run", "", 0, True),
    ("only the quark block", HEAD + QUARKS + SUMMARY, -6, True),
    ("quark block and a leak of ours", HEAD + QUARKS + OURS + SUMMARY, -6, False),
    ("a leak of ours only", HEAD + OURS + SUMMARY, -6, False),
    ("16 KB from our own code", HEAD + SAME_SIZE_OURS + SUMMARY, -6, False),
    ("indirect 16 KB", HEAD + INDIRECT + SUMMARY, -6, False),
    ("two 16 KB objects", HEAD + TWO_OBJECTS + SUMMARY, -6, False),
    ("16 KB from another library", HEAD + OTHER_LIB + SUMMARY, -6, False),
    ("quark block after a memory error", ASAN_ERROR + HEAD + QUARKS + SUMMARY, -6, False),
    ("failed assertion, no report", "**\nERROR:test.c:12:main: assertion failed\n", -6, False),
    ("plain failure exit", "", 1, False),
]


def stand_in(directory, err, code):
    path = os.path.join(directory, "stand-in.py")
    with open(path, "w") as f:
        f.write("import os, signal, sys\n")
        f.write(f"sys.stderr.write({err!r}); sys.stderr.flush()\n")
        f.write("print('ok 1 /stand-in')\n")
        if code < 0:
            f.write(f"sys.stdout.flush(); os.kill(os.getpid(), {-code})\n")
        f.write(f"sys.exit({max(code, 0)})\n")
    return path


def main():
    print(f"1..{len(CASES)}")
    failures = 0
    with tempfile.TemporaryDirectory() as directory:
        for i, (name, err, code, should_pass) in enumerate(CASES, 1):
            script = stand_in(directory, err, code)
            proc = subprocess.run([sys.executable, wrapper, sys.executable, script],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            passed = proc.returncode == 0
            ok = passed == should_pass and b"ok 1 /stand-in" in proc.stdout
            failures += not ok
            print(f"{'ok' if ok else 'not ok'} {i} {name} (wrapper exit {proc.returncode})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
