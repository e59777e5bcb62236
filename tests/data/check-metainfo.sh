#!/usr/bin/env bash
# appstreamcli validate as Flathub's linter applies it: errors, warnings and informational
# notes all fail (pedantic hints are listed, not failed).  One exception: AppStream before
# 1.0 (Debian 12 has 0.16) does not know the <developer> element that 1.0 and Flathub
# require, and reports it as an unknown tag; that note alone is forgiven on those versions.
set -uo pipefail
metainfo=$1
version=$(appstreamcli --version | sed -n 's/^AppStream version: *//p')
out=$(appstreamcli validate --no-net --pedantic --explain "$metainfo" 2>&1)
echo "$out"
echo "AppStream $version"
issues=$(printf '%s\n' "$out" | grep -E '^[EWI]: ' || true)
case "$version" in
  0.*) issues=$(printf '%s\n' "$issues" | grep -Ev '^I: [^ ]+:[0-9]+: unknown-tag developer$' || true) ;;
esac
if [ -n "$issues" ]; then
  echo "not clean:"
  printf '%s\n' "$issues"
  exit 1
fi
exit 0
