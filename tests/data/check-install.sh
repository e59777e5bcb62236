#!/usr/bin/env bash
# Installs the build into a temporary DESTDIR and checks that every file lands where
# GNOME looks for it.
set -euo pipefail
builddir=$1
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
meson install -C "$builddir" --destdir "$dest" --no-rebuild --quiet >/dev/null
prefix=$(meson introspect "$builddir" --buildoptions | python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"))')
root="$dest$prefix"
missing=0
for f in \
  bin/hanashi \
  bin/hanashi-cli \
  share/applications/io.github.hanashi.Hanashi.desktop \
  share/metainfo/io.github.hanashi.Hanashi.metainfo.xml \
  share/mime/packages/io.github.hanashi.Hanashi.xml \
  share/dbus-1/services/io.github.hanashi.Hanashi.service \
  share/glib-2.0/schemas/io.github.hanashi.Hanashi.gschema.xml \
  share/icons/hicolor/scalable/apps/io.github.hanashi.Hanashi.svg \
  share/icons/hicolor/symbolic/apps/io.github.hanashi.Hanashi-symbolic.svg \
  share/locale/ja/LC_MESSAGES/hanashi.mo \
  share/locale/zh_CN/LC_MESSAGES/hanashi.mo \
  share/hanashi/models.json \
  share/hanashi/grammars/json.gbnf
do
  if [ ! -e "$root/$f" ]; then
    echo "not installed: $prefix/$f"
    missing=1
  fi
done
[ -x "$root/bin/hanashi" ] || { echo "bin/hanashi is not executable"; missing=1; }
# The desktop file must launch the installed binary.
grep -q '^Exec=hanashi' "$root/share/applications/io.github.hanashi.Hanashi.desktop" || { echo "desktop file does not run hanashi"; missing=1; }
# D-Bus activation starts the installed binary under the app id the desktop file is named for.
service="$root/share/dbus-1/services/io.github.hanashi.Hanashi.service"
if [ -e "$service" ]; then
  grep -qx 'Name=io.github.hanashi.Hanashi' "$service" || { echo "D-Bus service has the wrong name"; missing=1; }
  grep -qx "Exec=$prefix/bin/hanashi --gapplication-service" "$service" || { echo "D-Bus service does not run $prefix/bin/hanashi"; missing=1; }
fi
grep -qx 'DBusActivatable=true' "$root/share/applications/io.github.hanashi.Hanashi.desktop" || { echo "desktop file is not D-Bus activatable"; missing=1; }
exit $missing
