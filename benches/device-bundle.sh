#!/usr/bin/env bash
# Builds what `benches/device.sh` needs on a bare lent machine into target/device-bundle (ignored,
# carried to the machine; the lent machine cannot build or download): tet-convert without the
# importers that need libhdf5/libnetcdf (`-p tet-cli --no-default-features`), the timeit,
# gen_npy, gen_small and zstd_chunks examples, and this machine's zstd CLI and strace with the
# shared libraries they link, and tet-convert's libstdc++ / libgcc_s, all stripped. Prints the size
# and `ldd` of the binaries.
#
#     bash benches/device-bundle.sh
#
# Note: the build writes target/release/tet-convert with that feature set; a later plain
# `cargo build --release` restores the default one.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
B=target/device-bundle
NEW=$B.new # filled first, then swapped in: a bundle being carried is never half-written
cargo build --release --locked -p tet-cli --no-default-features --bin tet-convert \
    --example timeit --example gen_npy --example gen_small --example zstd_chunks
rm -rf "$NEW"
mkdir -p "$NEW/bin" "$NEW/lib"
for f in target/release/tet-convert target/release/examples/timeit \
    target/release/examples/gen_npy target/release/examples/gen_small \
    target/release/examples/zstd_chunks; do
    cp "$f" "$NEW/bin/"
done
zstd_bin=$(command -v zstd)
cp "$zstd_bin" "$NEW/bin/zstd"
strace_bin=$(command -v strace || true)
[ -n "$strace_bin" ] && cp "$strace_bin" "$NEW/bin/strace"
# The shared libraries of these beside glibc (libstdc++ of the vendored zfp/sz3 C++ code, zstd's
# compression libraries, strace's libunwind), used only where the machine lacks them.
for lib in $(ldd "$zstd_bin" "$NEW/bin/tet-convert" $strace_bin |
    awk '/=> \// && !/libc\.so|libm\.so|ld-linux/ {print $3}' | sort -u); do
    cp -L "$lib" "$NEW/lib/"
done
strip "$NEW"/bin/*
git rev-parse HEAD >"$NEW/COMMIT"
git status --short -- src converters Cargo.toml Cargo.lock >>"$NEW/COMMIT"
rm -rf "$B.old"
[ -d "$B" ] && mv "$B" "$B.old"
mv "$NEW" "$B"
rm -rf "$B.old"
du -sh "$B"
ldd "$B/bin/tet-convert"
