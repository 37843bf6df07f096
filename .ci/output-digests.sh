#!/usr/bin/env bash
# Converts every input under the public corpus and the committed fixtures with the given `tet`
# binary (default options, then --skip-unsupported where the default refuses) and prints one line
# per input: the input path, then the sha256 of the .tet output or the first line of the refusal.
# Used to show a refactor left outputs byte-identical: run it before and after, then diff.
#   .ci/output-digests.sh target/release/tet > before.txt
set -u
if [ "${1:-}" = --extensions ]; then
  list_only=1
  shift
fi
bin=${1:?usage: output-digests.sh [--extensions] TET_BINARY}
root=$(cd "$(dirname "$0")/.." && pwd)
corpus=${TET_CORPUS:-$root/../shared/corpus/public}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export SOURCE_DATE_EPOCH=0
# The input extensions come from the binary's driver registry (`--formats --json`), so a new
# format is covered without editing this script. Directory formats (Zarr) are pruned at their
# folder and converted whole; `.tet` inputs are left out (they are our own outputs).
# `output-digests.sh --extensions BIN` prints the extensions used, one per line (tests/registry.rs).
registry_extensions() {
  "$bin" convert --formats --json | python3 -c '
import json, sys
for f in json.load(sys.stdin):
    if f["id"] != "tet":
        for e in f["extensions"]:
            print(("dir " if f["id"] == "zarr" else "file ") + e)'
}
if [ "${list_only:-}" = 1 ]; then
  registry_extensions | cut -d" " -f2
  exit 0
fi
inputs() {
  local dir_args=() file_args=()
  while read -r kind ext; do
    if [ "$kind" = dir ]; then
      dir_args+=(-o -iname "*.$ext")
    else
      file_args+=(-o -iname "*.$ext")
    fi
  done < <(registry_extensions)
  for d in "$corpus" "$root/fixtures" "$root"/converters/*/tests/fixtures; do
    [ -d "$d" ] || continue
    find "$d" \( -false "${dir_args[@]}" -o -name '*.zr' \) -prune -print -o -type f \
      \( -false "${file_args[@]}" \) -print
  done | sort
}
inputs | while IFS= read -r f; do
  rel=${f#"$root"/}
  rel=${rel#"$corpus"/}
  o=$out/x.tet
  rm -f "$o"
  if msg=$("$bin" convert --timeout 30 "$f" "$o" 2>&1); then
    echo "$rel $(sha256sum "$o" | cut -c1-16)"
  elif msg2=$("$bin" convert --timeout 30 --skip-unsupported "$f" "$o" 2>&1); then
    echo "$rel skip:$(sha256sum "$o" | cut -c1-16)"
  else
    echo "$rel refused: $(printf '%s' "$msg2" | head -n1 | sed "s#$f#IN#g; s#$out#OUT#g")"
  fi
done
