#!/bin/sh
# Install ncclwiz from its release: picks linux/amd64 or linux/arm64 from
# `uname -m`, downloads the tarball and checksums.txt, verifies the SHA-256
# and installs the binary (plus man pages and shell completions when the
# prefix is writable). POSIX sh; needs curl or wget, tar, and sha256sum or
# shasum.
#
#   curl -fsSL https://github.com/ncclwiz/ncclwiz/releases/latest/download/install.sh | sh
#
# Settings (environment):
#   NCCLWIZ_VERSION   a release such as 0.1.0 (default: the latest)
#   NCCLWIZ_PREFIX    install under PREFIX/bin (default: /usr/local as root, else ~/.local)
#   NCCLWIZ_BASE_URL  where the release files are (default: GitHub releases)
set -eu

repo=https://github.com/ncclwiz/ncclwiz
say() { printf 'ncclwiz install: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

os=$(uname -s)
[ "$os" = Linux ] || die "ncclwiz runs on Linux GPU servers; this is $os"
case $(uname -m) in
  x86_64 | amd64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) die "no ncclwiz build for $(uname -m) (there are linux amd64 and arm64); build from source: go install github.com/ncclwiz/ncclwiz@latest" ;;
esac

if [ -n "${NCCLWIZ_BASE_URL:-}" ]; then
  base=${NCCLWIZ_BASE_URL%/}
elif [ -n "${NCCLWIZ_VERSION:-}" ]; then
  base=$repo/releases/download/v${NCCLWIZ_VERSION#v}
else
  base=$repo/releases/latest/download
fi

if [ -n "${NCCLWIZ_PREFIX:-}" ]; then
  prefix=$NCCLWIZ_PREFIX
elif [ "$(id -u)" = 0 ]; then
  prefix=/usr/local
else
  prefix=$HOME/.local
fi

fetch() { # URL FILE
  if command -v curl >/dev/null 2>&1; then
    curl -fsSL --retry 2 -o "$2" "$1"
  elif command -v wget >/dev/null 2>&1; then
    wget -q -O "$2" "$1"
  else
    die "needs curl or wget"
  fi
}

sha256() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  elif command -v shasum >/dev/null 2>&1; then
    shasum -a 256 "$1" | cut -d' ' -f1
  else
    die "needs sha256sum or shasum to verify the download"
  fi
}

tmp=$(mktemp -d 2>/dev/null || mktemp -d -t ncclwiz)
trap 'rm -rf "$tmp"' EXIT INT TERM
tarball=ncclwiz_linux_$arch.tar.gz

say "downloading $base/$tarball"
fetch "$base/$tarball" "$tmp/$tarball" || die "download of $base/$tarball failed"
fetch "$base/checksums.txt" "$tmp/checksums.txt" || die "download of $base/checksums.txt failed"

want=$(awk -v f="$tarball" '$2 == f || $2 == "*" f { print $1; exit }' "$tmp/checksums.txt")
[ -n "$want" ] || die "checksums.txt has no line for $tarball"
got=$(sha256 "$tmp/$tarball")
[ "$got" = "$want" ] || die "checksum mismatch for $tarball: got $got, checksums.txt says $want; nothing was installed"

tar -xzf "$tmp/$tarball" -C "$tmp"
src=$tmp/ncclwiz_linux_$arch
[ -f "$src/ncclwiz" ] || die "$tarball does not hold ncclwiz_linux_$arch/ncclwiz"

mkdir -p "$prefix/bin" || die "cannot create $prefix/bin (set NCCLWIZ_PREFIX)"
# Through a temporary name and a rename: a running ncclwiz is never half-overwritten.
cp "$src/ncclwiz" "$prefix/bin/.ncclwiz.new"
chmod 0755 "$prefix/bin/.ncclwiz.new"
mv -f "$prefix/bin/.ncclwiz.new" "$prefix/bin/ncclwiz"
say "installed $prefix/bin/ncclwiz"

if [ -d "$src/man" ] && mkdir -p "$prefix/share/man/man1" 2>/dev/null; then
  cp "$src"/man/*.1.gz "$prefix/share/man/man1/" 2>/dev/null && say "man pages in $prefix/share/man/man1"
fi
if [ -d "$src/completions" ]; then
  mkdir -p "$prefix/share/bash-completion/completions" "$prefix/share/zsh/site-functions" "$prefix/share/fish/vendor_completions.d" 2>/dev/null &&
    cp "$src/completions/ncclwiz.bash" "$prefix/share/bash-completion/completions/ncclwiz" &&
    cp "$src/completions/ncclwiz.zsh" "$prefix/share/zsh/site-functions/_ncclwiz" &&
    cp "$src/completions/ncclwiz.fish" "$prefix/share/fish/vendor_completions.d/ncclwiz.fish" &&
    say "completions in $prefix/share"
fi

"$prefix/bin/ncclwiz" version >&2 || die "$prefix/bin/ncclwiz does not run here"
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) say "add $prefix/bin to PATH: export PATH=\"$prefix/bin:\$PATH\"" ;;
esac
