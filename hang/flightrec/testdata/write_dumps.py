#!/usr/bin/env python3
"""Writes flight-recorder dumps with the structure PyTorch's
NCCLTraceBuffer::dump (pickle, protocol 2 as torch::jit::pickle writes) and
dump_json produce, for ncclwiz's tests. The values are made up here.

usage: write_dumps.py OUTDIR SCENARIO VERSION FORMAT
  SCENARIO: desync | missing | lagging | healthy
  VERSION:  "2.3" … "2.10" (the dump's version_val)
  FORMAT:   pickle | json
Files are OUTDIR/nccl_trace_rank_<rank>.
"""
import json
import os
import pickle
import sys

WORLD = 4


def entry(version, rid, seq, op, sizes, dtype, state, pg=("0", "default_pg")):
    e = {
        "frames": [{"name": "all_reduce", "filename": "train.py", "line": 42}],
        "record_id": rid,
        "pg_id": 0,
        "process_group": pg,
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": "nccl:" + op,
        "time_created_ns": 1_700_000_000_000_000_000 + seq * 1_000_000,
        "input_sizes": [sizes],
        "input_dtypes": [dtype],
        "output_sizes": [sizes],
        "output_dtypes": [dtype],
        "state": state,
        "time_discovered_started_ns": None if state == "scheduled" else 1,
        "time_discovered_completed_ns": 2 if state == "completed" else None,
        "retired": state == "completed",
        "timeout_ms": 600000,
        "is_p2p": False,
    }
    if version in ("2.9", "2.10"):
        e["thread_name"] = "pt_main_thread"
        e["thread_id"] = "140234"
    return e


def rank_entries(version, scenario, rank):
    out = []
    last = 6
    if scenario == "lagging" and rank == 1:
        last = 5
    for seq in range(1, last + 1):
        op, sizes, dtype = "all_reduce", [1024, 1024], "Float"
        if seq == 6 and scenario == "desync" and rank == 2:
            op, sizes = "all_gather", [4096]
        state = "completed"
        if seq == last and scenario != "healthy":
            state = "started" if rank % 2 == 0 else "scheduled"
        if scenario == "lagging" and seq == 5:
            state = "completed"
        out.append(entry(version, seq - 1, seq, op, sizes, dtype, state))
    return out


def dump(version, scenario, rank, fmt):
    entries = rank_entries(version, scenario, rank)
    enq = entries[-1]["collective_seq_id"]
    done = max([e["collective_seq_id"] for e in entries if e["state"] == "completed"] or [0])
    d = {
        "version": version,
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(WORLD)))}},
        "pg_status": {"0": {"last_enqueued_collective": enq, "last_started_collective": enq,
                            "last_completed_collective": done}},
        "entries": entries,
    }
    if version in ("2.9", "2.10"):
        d["comm_lib_version"] = "2.27.5"
    elif version not in ("2.3",):
        d["nccl_version"] = "2.21.5"
    if fmt == "json":
        # dump_json: pg_status values are strings, tuples are lists, no frames.
        for k in d["pg_status"]:
            d["pg_status"][k] = {a: str(b) for a, b in d["pg_status"][k].items()}
        for e in d["entries"]:
            e.pop("frames")
            e["process_group"] = list(e["process_group"])
            for k in ("time_discovered_started_ns", "time_discovered_completed_ns"):
                e[k] = e[k] or 0
        return json.dumps(d).encode()
    return pickle.dumps(d, protocol=2)


def main():
    outdir, scenario, version, fmt = sys.argv[1:5]
    for rank in range(WORLD):
        if scenario == "missing" and rank == 3:
            continue
        with open(os.path.join(outdir, "nccl_trace_rank_%d" % rank), "wb") as f:
            f.write(dump(version, scenario, rank, fmt))


if __name__ == "__main__":
    main()
