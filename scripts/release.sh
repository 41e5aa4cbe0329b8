#!/usr/bin/env bash
# Builds the release artifacts into dist/ the way .goreleaser.yaml describes
# them, without goreleaser (whose build is too slow for every CI run, see
# docs/development.md "Releases"): linux/amd64 and linux/arm64 binaries
# (CGO_ENABLED=0, NVML by dlopen), tarballs with the man pages and shell
# completions, checksums.txt, .deb and .rpm through nfpm
# (packaging/nfpm.yaml, same contents as .goreleaser.yaml's nfpms), the
# Python wheels, and install.sh.
#
#   scripts/release.sh            # version from an exact vX.Y.Z tag, else a snapshot
#   VERSION=1.2.3 scripts/release.sh
#   DIST=/tmp/dist scripts/release.sh
set -euo pipefail
cd "$(dirname "$0")/.."

NFPM_VERSION=v2.45.2 # pinned from the Go module proxy, like goreleaser in .goreleaser.yaml
DIST=${DIST:-dist}
ARCHES=${ARCHES:-amd64 arm64}

if [ -z "${VERSION:-}" ]; then
  if tag=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null); then
    VERSION=${tag#v}
  else
    VERSION="0.0.0-snapshot.$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
  fi
fi
export VERSION

rm -rf "$DIST"
mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ncclwiz-release.XXXXXX")
trap 'rm -rf "$work"' EXIT

ldflags="-s -w -X main.version=$VERSION"
for arch in $ARCHES; do
  echo "== build linux/$arch ($VERSION)"
  mkdir -p "$work/$arch"
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "$ldflags" -o "$work/$arch/ncclwiz" .
done

# Man pages and completions come from the commands' own help; the build
# machine's binary writes them (they are the same for every architecture).
hostarch=$(go env GOARCH)
gen="$work/$hostarch/ncclwiz"
[ -x "$gen" ] || { CGO_ENABLED=0 go build -o "$work/gen-ncclwiz" . && gen="$work/gen-ncclwiz"; }
mkdir -p "$work/share/man" "$work/share/completions"
"$gen" man "$work/share/man"
gzip -9n "$work"/share/man/*.1
for sh in bash zsh fish; do
  "$gen" completion "$sh" >"$work/share/completions/ncclwiz.$sh"
done

for arch in $ARCHES; do
  echo "== archive linux/$arch"
  stage="$work/stage-$arch/ncclwiz_linux_$arch"
  mkdir -p "$stage"
  cp "$work/$arch/ncclwiz" README.md LICENSE CHANGELOG.md "$stage/"
  cp -r "$work/share/man" "$work/share/completions" "$stage/"
  tar -C "$work/stage-$arch" --owner=0 --group=0 --numeric-owner --sort=name --mtime='2026-01-01 00:00Z' \
    -czf "$DIST/ncclwiz_linux_$arch.tar.gz" "ncclwiz_linux_$arch"
done

echo "== packages (nfpm $NFPM_VERSION)"
nfpm=$(go env GOPATH)/bin/nfpm-$NFPM_VERSION
mkdir -p "$(dirname "$nfpm")"
if [ ! -x "$nfpm" ]; then
  GOBIN="$work/gobin" go install "github.com/goreleaser/nfpm/v2/cmd/nfpm@$NFPM_VERSION"
  mv "$work/gobin/nfpm" "$nfpm"
fi
for arch in $ARCHES; do
  for fmt in deb rpm; do
    NCCLWIZ_BIN="$work/$arch/ncclwiz" NCCLWIZ_SHARE="$work/share" ARCH=$arch \
      "$nfpm" package --config packaging/nfpm.yaml --packager "$fmt" --target "$DIST/" >/dev/null
  done
done

echo "== wheels"
for arch in $ARCHES; do
  python3 packaging/wheel/build_wheel.py --binary "$work/$arch/ncclwiz" --arch "$arch" --version "$VERSION" --out "$DIST"
done

cp install.sh "$DIST/install.sh"

(cd "$DIST" && sha256sum -- *.tar.gz *.deb *.rpm *.whl install.sh >checksums.txt)
echo "== $DIST"
(cd "$DIST" && ls -l)
