"""Fake torch.distributed: real multi-process collectives through files.

Each collective call gets a sequence number; rank r writes its values to
FAKE_TORCH_STORE/<seq>.<r> and waits for every rank's file. Slow, exact and
good enough for messages of a few KB. init_process_group prints NCCL-style
INFO transport lines chosen from NCCL_P2P_DISABLE / NCCL_SHM_DISABLE, as
NCCL does with NCCL_DEBUG=INFO. Knobs:

  FAKE_TORCH_CORRUPT="rank:bytes"   that rank adds 1 to element 0 of every
                                    all_reduce of that many bytes
  FAKE_TORCH=old                    no torch.distributed.run submodule
"""

import json
import os
import socket
import time

import torch


class ReduceOp:
    SUM = "sum"
    MAX = "max"


class DistBackendError(RuntimeError):
    pass


_state = {"rank": 0, "world": 1, "seq": 0, "store": None}

if os.environ.get("FAKE_TORCH") == "old":
    __path__ = []  # noqa: F811 - an old torch without torch.distributed.run


def is_available():
    return True


def is_nccl_available():
    return True


def get_rank():
    return _state["rank"]


def get_world_size():
    return _state["world"]


def _via():
    p2p_off = os.environ.get("NCCL_P2P_DISABLE") == "1"
    shm_off = os.environ.get("NCCL_SHM_DISABLE") == "1"
    if not p2p_off:
        return "/0", "", "P2P/IPC/read"
    if not shm_off:
        return "", "", "SHM/direct/direct"
    return "/0", "[send] ", "NET/Socket/0"


def init_process_group(backend, timeout=None):
    _state["rank"] = int(os.environ["RANK"])
    _state["world"] = int(os.environ["WORLD_SIZE"])
    _state["store"] = os.environ["FAKE_TORCH_STORE"]
    _state["timeout"] = timeout.total_seconds() if timeout else 60
    r, w = _state["rank"], _state["world"]
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if os.environ.get("NCCL_DEBUG") == "INFO":
        pre = "%s:%d:%d [%d] NCCL INFO " % (socket.gethostname(), os.getpid(), os.getpid(), local)
        if r == 0:
            print("NCCL version 2.21.5+cuda12.4", flush=True)
        print(pre + "comm 0x5555 rank %d nRanks %d nNodes 1 localRanks %d localRank %d MNNVL 0" % (r, w, w, local), flush=True)
        if w > 1:
            ch, direction, via = _via()
            nxt = (r + 1) % w
            for c in range(2):
                print(pre + "Channel %02d%s : %d[%d] -> %d[%d] %svia %s" % (c, ch, r, r, nxt, nxt, direction, via), flush=True)
        print(pre + "ncclCommInitRank comm 0x5555 rank %d nranks %d cudaDev %d nvmlDev %d busId 1000 commId 0x1 - Init COMPLETE" % (r, w, local, local), flush=True)


def _exchange(values):
    _state["seq"] += 1
    seq, r, w, store = _state["seq"], _state["rank"], _state["world"], _state["store"]
    tmp = os.path.join(store, "%d.%d.tmp" % (seq, r))
    with open(tmp, "w") as f:
        json.dump(values, f)
    os.rename(tmp, os.path.join(store, "%d.%d" % (seq, r)))
    out = []
    deadline = time.time() + _state["timeout"]
    for peer in range(w):
        path = os.path.join(store, "%d.%d" % (seq, peer))
        while not os.path.exists(path):
            if time.time() > deadline:
                raise DistBackendError("fake NCCL: rank %d waited for rank %d (op %d) too long" % (r, peer, seq))
            time.sleep(0.001)
        with open(path) as f:
            out.append(json.load(f))
    return out


def all_reduce(t, op=ReduceOp.SUM):
    parts = _exchange(t.data)
    if op == ReduceOp.MAX:
        t.data = [max(xs) for xs in zip(*parts)]
    else:
        t.data = [sum(xs) for xs in zip(*parts)]
    corrupt = os.environ.get("FAKE_TORCH_CORRUPT", "")
    if corrupt:
        rank, nbytes = corrupt.split(":")
        if int(rank) == _state["rank"] and int(nbytes) == len(t.data) * 4 and t.dtype is torch.float32:
            t.data[0] += 1


def all_gather_into_tensor(out, inp):
    parts = _exchange(inp.data)
    out.data = [x for part in parts for x in part]


def barrier():
    _exchange([0])


def destroy_process_group():
    pass
