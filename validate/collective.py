"""ncclwiz collective test, run by torchrun: one process per GPU.

Every rank prints machine-readable lines on stdout, each starting with
"NCCLWIZ_RESULT " and followed by one JSON object:

  kind "start"  rank, world, local_rank, torch, cuda, nccl, device, cc
  kind "result" op ("all_reduce" or "all_gather"), bytes, count, dtype,
                ok, wrong, iters, time_us, algbw, busbw (GB/s)
  kind "done"   ok (every result of this rank was correct)
  kind "error"  stage, type, error, traceback (last lines)

Every object carries "v" (schema version) and "rank". Values are checked
exactly: all_reduce sums rank-dependent integers (exact in float32) whose
total is known, all_gather checks the order of the gathered chunks. Bus
bandwidth uses the nccl-tests formulas (doc/PERFORMANCE.md): all_reduce
algbw * 2(n-1)/n, all_gather algbw * (n-1)/n, with the slowest rank's time.

Only the standard library and torch are used. Settings come from the
environment: NCCLWIZ_SIZES (comma-separated bytes), NCCLWIZ_COLL_TIMEOUT
(seconds, the process-group timeout).
"""

import datetime
import json
import os
import sys
import traceback

PREFIX = "NCCLWIZ_RESULT "
SCHEMA = 1
DEFAULT_SIZES = [8, 128, 2048, 32768, 524288, 8388608, 67108864, 268435456]


def emit(obj):
    obj["v"] = SCHEMA
    sys.stdout.write(PREFIX + json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def env_int(name, default):
    raw = os.environ.get(name, "")
    try:
        return int(raw) if raw else default
    except ValueError:
        return default


def sizes_from_env():
    raw = os.environ.get("NCCLWIZ_SIZES", "").strip()
    if not raw:
        return list(DEFAULT_SIZES)
    out = []
    for part in raw.split(","):
        part = part.strip()
        if part:
            out.append(int(part))
    return out


def iterations(nbytes):
    """(warmup, timed) iterations: many for small messages, few for large."""
    if nbytes <= 1 << 20:
        return 5, 20
    if nbytes <= 64 << 20:
        return 2, 10
    return 2, 5


def nccl_version(torch):
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - the version is informative only
        return ""
    if isinstance(v, tuple):
        return ".".join(str(x) for x in v)
    return str(v)


def timed(torch, dist, dev, world, fn, nbytes, factor):
    """Runs fn warmup+iters times; returns (time_us, algbw, busbw, iters).

    The time is the slowest rank's, as NCCL collectives finish together
    and a straggler defines the bandwidth everyone sees.
    """
    warmup, iters = iterations(nbytes)
    for _ in range(warmup):
        fn()
    dist.barrier()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    ms = torch.tensor([start.elapsed_time(end) / iters], dtype=torch.float64, device=dev)
    dist.all_reduce(ms, op=dist.ReduceOp.MAX)
    sec = ms.item() / 1e3
    if sec <= 0:
        return 0.0, 0.0, 0.0, iters
    algbw = nbytes / sec / 1e9
    return sec * 1e6, algbw, algbw * factor, iters


def all_reduce_step(torch, dist, dev, rank, world, nbytes):
    n = max(1, nbytes // 4)
    # 1..7 repeating, times (rank+1): every sum is a small integer, exact in
    # float32, and a misplaced chunk changes the pattern.
    base = (torch.arange(n, device=dev) % 7 + 1).to(torch.float32)
    x = base * float(rank + 1)
    dist.all_reduce(x)
    expected = base * float(world * (world + 1) // 2)
    wrong = int((x != expected).sum().item())
    del x
    z = torch.zeros(n, dtype=torch.float32, device=dev)
    actual = n * 4
    t_us, algbw, busbw, iters = timed(
        torch, dist, dev, world, lambda: dist.all_reduce(z), actual, 2.0 * (world - 1) / world)
    return {"kind": "result", "op": "all_reduce", "bytes": actual, "count": n,
            "dtype": "float32", "ok": wrong == 0, "wrong": wrong, "iters": iters,
            "time_us": t_us, "algbw": algbw, "busbw": busbw}


def all_gather_step(torch, dist, dev, rank, world, nbytes):
    chunk = max(1, nbytes // 4 // world)
    pattern = (torch.arange(chunk, device=dev) % 5 + 1).to(torch.float32)
    inp = pattern + float(10 * rank)
    out = torch.empty(chunk * world, dtype=torch.float32, device=dev)
    gather = getattr(dist, "all_gather_into_tensor", None) or getattr(dist, "_all_gather_base")
    gather(out, inp)
    expected = torch.cat([pattern + float(10 * r) for r in range(world)])
    wrong = int((out != expected).sum().item())
    actual = chunk * world * 4
    t_us, algbw, busbw, iters = timed(
        torch, dist, dev, world, lambda: gather(out, inp), actual, float(world - 1) / world)
    return {"kind": "result", "op": "all_gather", "bytes": actual, "count": chunk * world,
            "dtype": "float32", "ok": wrong == 0, "wrong": wrong, "iters": iters,
            "time_us": t_us, "algbw": algbw, "busbw": busbw}


def main():
    rank = env_int("RANK", 0)
    world = env_int("WORLD_SIZE", 1)
    local_rank = env_int("LOCAL_RANK", 0)
    stage = "import torch"
    try:
        import torch
        import torch.distributed as dist

        stage = "select GPU"
        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False in this process")
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)

        stage = "init_process_group"
        timeout = datetime.timedelta(seconds=env_int("NCCLWIZ_COLL_TIMEOUT", 120))
        dist.init_process_group("nccl", timeout=timeout)
        rank = dist.get_rank()
        world = dist.get_world_size()
        props = torch.cuda.get_device_properties(dev)
        emit({"kind": "start", "rank": rank, "world": world, "local_rank": local_rank,
              "torch": torch.__version__, "cuda": torch.version.cuda or "",
              "nccl": nccl_version(torch), "device": props.name,
              "cc": "%d.%d" % (props.major, props.minor)})

        ok = True
        for nbytes in sizes_from_env():
            stage = "all_reduce %d bytes" % nbytes
            res = all_reduce_step(torch, dist, dev, rank, world, nbytes)
            res["rank"] = rank
            emit(res)
            ok = ok and res["ok"]
            stage = "all_gather %d bytes" % nbytes
            res = all_gather_step(torch, dist, dev, rank, world, nbytes)
            res["rank"] = rank
            emit(res)
            ok = ok and res["ok"]

        stage = "barrier"
        dist.barrier()
        torch.cuda.synchronize()
        emit({"kind": "done", "rank": rank, "ok": ok})
        stage = "destroy_process_group"
        dist.destroy_process_group()
        return 0 if ok else 3
    except BaseException as exc:  # noqa: BLE001 - report everything, then fail
        tb = traceback.format_exc().strip().splitlines()[-6:]
        emit({"kind": "error", "rank": rank, "stage": stage, "type": type(exc).__name__,
              "error": str(exc)[:2000], "traceback": tb})
        return 1


if __name__ == "__main__":
    sys.exit(main())
