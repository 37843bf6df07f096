#!/usr/bin/env bash
# Converts every input under the public corpus and the committed fixtures with the given `tet`
# binary (default options, then --skip-unsupported where the default refuses) and prints one line
# per input: the input path, then the sha256 of the .tet output or the first line of the refusal.
# Used to show a refactor left outputs byte-identical: run it before and after, then diff.
#   .ci/output-digests.sh target/release/tet > before.txt
set -u
bin=${1:?usage: output-digests.sh TET_BINARY}
root=$(cd "$(dirname "$0")/.." && pwd)
corpus=${TET_CORPUS:-$root/../shared/corpus/public}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export SOURCE_DATE_EPOCH=0
inputs() {
  for d in "$corpus" "$root/fixtures" "$root"/converters/*/tests/fixtures; do
    [ -d "$d" ] || continue
    find "$d" \( -name '*.zarr' -o -name '*.zr' \) -prune -print -o -type f \
      \( -iname '*.nc' -o -iname '*.nc4' -o -iname '*.h5' -o -iname '*.hdf5' -o -iname '*.he5' \
         -o -iname '*.npy' -o -iname '*.npz' -o -iname '*.tea' -o -iname '*.tgm' \) -print
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
