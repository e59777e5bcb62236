#!/usr/bin/env bash
# Fails when a catalog in po/ leaves any current string untranslated or fuzzy: the
# template is extracted afresh from POTFILES, so a new _() string without translations
# makes this test fail.
set -euo pipefail
srcdir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

xgettext --package-name=hanashi --from-code=UTF-8 --add-comments \
  --keyword=_ --keyword=N_ --keyword=C_:1c,2 --keyword=NC_:1c,2 \
  --keyword=g_dcgettext:2 --keyword=g_dngettext:2,3 --keyword=g_dpgettext2:2c,3 \
  --flag=N_:1:pass-c-format --flag=C_:2:pass-c-format --flag=NC_:2:pass-c-format \
  --flag=g_strdup_printf:1:c-format --flag=g_string_append_printf:2:c-format \
  --flag=g_set_error:4:c-format \
  -D "$srcdir" -f "$srcdir/po/POTFILES.in" -o "$work/hanashi.pot"

status=0
while read -r lang; do
  case "$lang" in ''|\#*) continue ;; esac
  msgmerge --quiet --no-fuzzy-matching "$srcdir/po/$lang.po" "$work/hanashi.pot" -o "$work/$lang.po"
  msgfmt --check -o /dev/null "$work/$lang.po"
  untranslated=$(msgattrib --untranslated --no-obsolete "$work/$lang.po" | grep -c '^msgid ' || true)
  fuzzy=$(msgattrib --only-fuzzy --no-obsolete "$work/$lang.po" | grep -c '^msgid ' || true)
  # msgattrib prints the header entry too whenever it prints anything
  [ "$untranslated" -gt 0 ] && untranslated=$((untranslated - 1))
  [ "$fuzzy" -gt 0 ] && fuzzy=$((fuzzy - 1))
  echo "$lang: $untranslated untranslated, $fuzzy fuzzy"
  if [ "$untranslated" -ne 0 ] || [ "$fuzzy" -ne 0 ]; then
    # Name the offending strings; no grep match must not end the loop under set -e.
    { msgattrib --untranslated --no-obsolete "$work/$lang.po"
      msgattrib --only-fuzzy --no-obsolete "$work/$lang.po"; } | grep '^msgid "..*"' | sed "s/^/  $lang: /" | head -20 || true
    status=1
  fi
done < "$srcdir/po/LINGUAS"

# Japanese labels have no "(_A)"-style mnemonics: Latin letters in parentheses after
# Japanese words read as clutter, and the input method makes them awkward to type.
mnemonics=$(msggrep --no-wrap --msgstr -E -e '\(_[[:alnum:]]\)' "$work/ja.po" | grep '^msgstr "..*"' || true)
if [ -n "$mnemonics" ]; then
  echo "ja: mnemonics in parentheses:"
  printf '%s\n' "$mnemonics" | sed 's/^/  ja: /'
  status=1
fi
exit $status
