"""ncclwiz probe: which torch this interpreter has, and whether it can run NCCL.

Prints one line: NCCLWIZ_PROBE {json}. Never raises; a missing torch is
reported in "error" so that ncclwiz can say what to install.
"""

import json
import sys


def main():
    out = {"python": sys.version.split()[0], "executable": sys.executable}
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure is the answer
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
        print("NCCLWIZ_PROBE " + json.dumps(out, sort_keys=True))
        return 0
    out["torch"] = getattr(torch, "__version__", "")
    out["cuda"] = getattr(torch.version, "cuda", None) or ""
    try:
        out["cuda_available"] = bool(torch.cuda.is_available())
        out["device_count"] = int(torch.cuda.device_count()) if out["cuda_available"] else 0
    except Exception as exc:  # noqa: BLE001
        out["cuda_error"] = "%s: %s" % (type(exc).__name__, exc)
    try:
        import importlib.util
        out["run_module"] = importlib.util.find_spec("torch.distributed.run") is not None
    except Exception:  # noqa: BLE001 - find_spec imports the parent package
        out["run_module"] = False
    try:
        import torch.distributed as dist
        out["distributed"] = bool(dist.is_available())
        out["nccl_available"] = bool(dist.is_available() and dist.is_nccl_available())
    except Exception as exc:  # noqa: BLE001
        out["distributed_error"] = "%s: %s" % (type(exc).__name__, exc)
    try:
        v = torch.cuda.nccl.version()
        out["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception:  # noqa: BLE001 - informative only
        pass
    print("NCCLWIZ_PROBE " + json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
