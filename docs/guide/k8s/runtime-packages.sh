#!/usr/bin/env bash
# Prints the Debian packages that hold the shared libraries the given binaries link, one a line:
# what the run-time stage of docs/guide/k8s/Dockerfile installs. Fails when a library belongs to
# no package (a library built by hand under /usr/local would be missing from the image).
set -euo pipefail
(($#)) || { echo "usage: $0 BINARY…" >&2; exit 2; }
libs=$(ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
[ -n "$libs" ] || { echo "runtime-packages: no shared library found in $*" >&2; exit 1; }
for lib in $libs; do
  real=$(readlink -f "$lib")
  # Debian 12 merges /lib into /usr/lib: dpkg knows a file under one of the two names.
  found=""
  for p in "$lib" "$real" "/usr${lib#/usr}" "${lib#/usr}" "/usr${real#/usr}" "${real#/usr}"; do
    if owner=$(dpkg -S "$p" 2>/dev/null); then found=${owner%%:*}; break; fi
  done
  [ -n "$found" ] || { echo "runtime-packages: no Debian package holds $lib" >&2; exit 1; }
  echo "$found"
done | sort -u
