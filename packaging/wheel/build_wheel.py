#!/usr/bin/env python3
"""Build a Python wheel that carries the ncclwiz binary.

`pip install ncclwiz` (or `uvx ncclwiz`) then puts the Go binary on PATH,
the way ruff's wheels ship their binary: the file sits in the wheel's
.data/scripts directory, which pip installs into the environment's bin/
with its executable bit. No Python runs when ncclwiz runs.

The tag is manylinux_2_17 (manylinux2014): the binary asks the dynamic
loader for no GLIBC symbol version at all (docs/development.md, "Portable
binaries"), so any glibc from 2.17 on loads it. Only the standard library is
used: the wheel is a zip with METADATA, WHEEL and RECORD (PEP 427, 491).
"""

import argparse
import base64
import hashlib
import os
import re
import sys
import zipfile

PLATFORMS = {
    "amd64": "manylinux_2_17_x86_64.manylinux2014_x86_64",
    "arm64": "manylinux_2_17_aarch64.manylinux2014_aarch64",
}

SUMMARY = "Terminal wizard for NCCL failures of multi-GPU PyTorch jobs (detect, explain, fix, validate)"


def pep440(version: str) -> str:
    """1.2.3 stays; a snapshot (1.2.3-snapshot.abc) becomes 1.2.3.dev0."""
    m = re.fullmatch(r"(\d+\.\d+\.\d+)(?:-(.+))?", version)
    if not m:
        raise SystemExit(f"version {version!r} is not X.Y.Z or X.Y.Z-suffix")
    return m.group(1) + (".dev0" if m.group(2) else "")


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def build(binary: str, arch: str, version: str, out: str, readme: str) -> str:
    ver = pep440(version)
    tag = f"py3-none-{PLATFORMS[arch]}"
    dist_info = f"ncclwiz-{ver}.dist-info"
    data = f"ncclwiz-{ver}.data"
    with open(readme, encoding="utf-8") as f:
        long_description = f.read()
    metadata = "\n".join([
        "Metadata-Version: 2.1",
        "Name: ncclwiz",
        f"Version: {ver}",
        f"Summary: {SUMMARY}",
        "Home-page: https://github.com/ncclwiz/ncclwiz",
        "License: MIT",
        "Classifier: Environment :: Console",
        "Classifier: License :: OSI Approved :: MIT License",
        "Classifier: Operating System :: POSIX :: Linux",
        "Classifier: Topic :: System :: Systems Administration",
        "Requires-Python: >=3.7",
        "Description-Content-Type: text/markdown",
        "",
        long_description,
    ])
    wheel = "\n".join([
        "Wheel-Version: 1.0",
        "Generator: ncclwiz packaging/wheel/build_wheel.py",
        "Root-Is-Purelib: false",
        f"Tag: {tag}",
        "",
    ])
    with open(binary, "rb") as f:
        exe = f.read()
    with open("LICENSE", "rb") as f:
        license_text = f.read()
    files = [
        (f"{data}/scripts/ncclwiz", exe, 0o755),
        (f"{dist_info}/METADATA", metadata.encode(), 0o644),
        (f"{dist_info}/WHEEL", wheel.encode(), 0o644),
        (f"{dist_info}/LICENSE", license_text, 0o644),
    ]
    record = [f"{name},{record_hash(body)},{len(body)}" for name, body, _ in files]
    record.append(f"{dist_info}/RECORD,,")
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))

    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"ncclwiz-{ver}-{tag}.whl")
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, body, mode in files:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16  # regular file and its mode
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, body)
    return path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--binary", required=True, help="the linux ncclwiz binary for --arch")
    p.add_argument("--arch", required=True, choices=sorted(PLATFORMS))
    p.add_argument("--version", required=True, help="X.Y.Z or X.Y.Z-suffix (a snapshot)")
    p.add_argument("--out", default="dist")
    p.add_argument("--readme", default="README.md")
    a = p.parse_args()
    print(build(a.binary, a.arch, a.version, a.out, a.readme))
    return 0


if __name__ == "__main__":
    sys.exit(main())
