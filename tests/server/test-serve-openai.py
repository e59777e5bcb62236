#!/usr/bin/env python3
"""Starts hanashi-cli serve and lets the `openai` npm package drive it
(openai-client.mjs, TAP).  The package is installed by tools/install-deps (`npm ci` here);
without it the test is skipped, except in CI (CI=true), where that is a failure.  Nothing
is downloaded at run time."""
import os
import shutil
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from serve_fixture import Server, testdata  # noqa: E402

in_ci = os.environ.get("CI") == "true"
node = shutil.which("node")
package = os.path.join(here, "node_modules", "openai", "package.json")
if not node or not os.path.exists(package):
    why = "node is not installed" if not node else "tests/server/node_modules is missing (run tools/install-deps)"
    if in_ci:
        print(f"1..1\nnot ok 1 - the openai package can run: {why}")
        sys.exit(1)
    print(f"1..0 # SKIP {why}")
    sys.exit(0)

KEY = "openai-test-key"
with Server(testdata("models", "stories260K-f32.gguf"), "--parallel", "2", "-c", "128", "-t", "2",
            "--model-id", "tiny", env={"HANASHI_API_KEY": KEY}) as srv:
    result = subprocess.run([node, os.path.join(here, "openai-client.mjs")],
                            env={**os.environ, "HANASHI_SERVER_URL": srv.url, "HANASHI_SERVER_KEY": KEY})
sys.exit(result.returncode)
