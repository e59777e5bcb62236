#!/usr/bin/env bash
# The GGUF MIME type as the desktop sees it: the built shared-mime-info file is well-formed,
# update-mime-database accepts it, and GIO then names application/x-gguf for a model file
# by its extension and, under another name, by its "GGUF" magic at offset 0, while other
# files keep their own types.
set -euo pipefail
mime_file=$1
xmllint --noout "$mime_file"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/data/mime/packages" "$tmp/home" "$tmp/files"
cp "$mime_file" "$tmp/data/mime/packages/"
update-mime-database "$tmp/data/mime"
[ -s "$tmp/data/mime/mime.cache" ] || { echo "update-mime-database wrote no cache"; exit 1; }
grep -qx 'application/x-gguf' "$tmp/data/mime/types" || { echo "application/x-gguf is not registered"; exit 1; }
# The comment is translated (msgfmt with shared-mime-info's ITS rules).
for lang in ja zh_CN; do
  grep -q "<comment xml:lang=\"$lang\">" "$mime_file" || { echo "the MIME comment has no $lang translation"; exit 1; }
done

# A GGUF header: magic, version 3, no tensors, no metadata.
printf 'GGUF\003\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' > "$tmp/files/model.gguf"
cp "$tmp/files/model.gguf" "$tmp/files/model-without-extension"
printf 'GGML\003\000\000\000 not a gguf file' > "$tmp/files/other-without-extension"
printf '# Notes\n' > "$tmp/files/notes.md"

content_type() {
  XDG_DATA_DIRS="$tmp/data:/usr/share" XDG_DATA_HOME="$tmp/home" \
    gio info -a standard::content-type "$1" | sed -n 's/^ *standard::content-type: //p'
}
status=0
expect() {
  local got
  got=$(content_type "$tmp/files/$1")
  if [ "$got" = "$2" ]; then
    echo "ok: $1 is $got"
  else
    echo "FAIL: $1 is $got, expected $2"
    status=1
  fi
}
expect_not() {
  local got
  got=$(content_type "$tmp/files/$1")
  if [ "$got" != "$2" ]; then
    echo "ok: $1 is $got"
  else
    echo "FAIL: $1 is $got"
    status=1
  fi
}
expect model.gguf application/x-gguf
expect model-without-extension application/x-gguf
expect_not other-without-extension application/x-gguf
expect_not notes.md application/x-gguf
exit $status
