#!/usr/bin/env bash
# Prints the path of a root filesystem tarball of an older Debian userland
# (bullseye: glibc 2.31, below the build machine's 2.36), made with
# debootstrap from the configured Debian mirror on first use and cached.
# Bullseye is the oldest suite the mirror here still serves (buster,
# stretch and older answer 404; archive.debian.org is not reachable), so no
# container here has glibc 2.17 itself: the 2.17 floor is checked on the
# binary's symbol versions (internal/release TestGlibcNeeds).
#
#   scripts/old-userland.sh [SUITE]     # default bullseye
set -euo pipefail
suite=${1:-bullseye}
arch=$(dpkg --print-architecture)
cache=${NCCLWIZ_CACHE:-/var/cache/ncclwiz-ci}
out="$cache/rootfs-$suite-$arch.tar"
if [ -s "$out" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.rootfs-$suite.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
debootstrap --variant=minbase --arch="$arch" "$suite" "$tmp/root" "$mirror" >"$tmp/log" 2>&1 || {
  tail -20 "$tmp/log" >&2
  exit 1
}
rm -rf "$tmp/root/var/cache/apt/archives"/*.deb "$tmp/root/var/lib/apt/lists"/*
tar -C "$tmp/root" -cf "$tmp/rootfs.tar" .
mv "$tmp/rootfs.tar" "$out"
echo "$out"
