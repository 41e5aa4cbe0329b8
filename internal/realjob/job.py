# The job of ncclwiz's real-job test bed (internal/realjob): one file, three
# modes, chosen by the first argument.
#   rank    one rank of a gloo job (started by torchrun, mpirun or srun, or
#           by the two modes below); its rank comes from RANK,
#           OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID
#   spawn   torch.multiprocessing.spawn of the ranks (the rank is an argument)
#   launch  a custom launcher: subprocess.Popen of each rank with RANK set
# REALJOB_PLAN (JSON, written by realjob.Start) says what each rank does;
# markers in REALJOB_DIR say where each rank is, so a test samples a job that
# has reached the state it wants, never one still starting.
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

PLAN = json.loads(os.environ["REALJOB_PLAN"])
DIR = os.environ["REALJOB_DIR"]


def mark(rank, what, text=""):
    path = os.path.join(DIR, "rank%d.%s" % (rank, what))
    with open(path + ".tmp", "w") as f:
        f.write("%d %s\n" % (os.getpid(), text))
    os.rename(path + ".tmp", path)


def behaviour(rank):
    return PLAN["behave"].get(str(rank), "healthy")


def pick_batch(items, index):
    return items[index]


class Numbers:
    # A map-style dataset for the DataLoader of "loader-killed".
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        return i


def vfork_pause():
    # Uninterruptible sleep (D) without slow storage: clone(CLONE_VM |
    # CLONE_VFORK) suspends this thread in the kernel until the child execs
    # or exits, and the child runs libc's pause() on a stack of its own (no
    # Python runs in it). The wait is killable: SIGKILL of either ends it.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.clone.restype = ctypes.c_int
    libc.clone.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    stack = ctypes.create_string_buffer(1 << 16)
    top = ctypes.addressof(stack) + len(stack) - 64
    CLONE_VM, CLONE_VFORK = 0x100, 0x4000
    pid = libc.clone(ctypes.cast(libc.pause, ctypes.c_void_p), top, CLONE_VM | CLONE_VFORK | signal.SIGCHLD, None)
    if pid < 0:
        sys.exit("clone: errno %d" % ctypes.get_errno())
    time.sleep(1e6)  # the child was killed: stay away from the collective


def act(rank, beh, loader_iter):
    if beh == "sleep":
        time.sleep(1e6)
    elif beh == "spin":
        x = 0
        while True:
            x += 1
    elif beh == "block-io":
        fifo = os.path.join(DIR, "rank%d.fifo" % rank)
        os.mkfifo(fifo)
        fd = os.open(fifo, os.O_RDWR)  # nobody else writes: read blocks
        os.read(fd, 1)
    elif beh == "d-state":
        vfork_pause()
    elif beh == "sigstop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif beh == "exit":
        print("rank %d: giving up at step %d" % (rank, PLAN["at"]), flush=True)
        sys.exit(3)
    elif beh == "raise":
        pick_batch([0, 1, 2], PLAN["at"] + 5)
    elif beh == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif beh == "sigsegv":
        import ctypes
        ctypes.string_at(0)
    elif beh == "loader-killed":
        os.kill(loader_iter._workers[0].pid, signal.SIGKILL)
        time.sleep(0.5)


def run(rank):
    mark(rank, "start")
    beh = behaviour(rank)
    import datetime

    import torch
    import torch.distributed as dist

    if beh == "absent":
        mark(rank, "at", beh)  # it never reaches init_process_group
        time.sleep(1e6)
    mark(rank, "init")
    dist.init_process_group("gloo", rank=rank, world_size=PLAN["world"],
                            timeout=datetime.timedelta(seconds=PLAN["timeout"]))
    loader_iter = None
    if beh == "loader-killed":
        loader = torch.utils.data.DataLoader(Numbers(), batch_size=4, num_workers=1)
        loader_iter = iter(loader)
    t = torch.ones(4)
    step = 0
    while PLAN["steps"] == 0 or step < PLAN["steps"]:
        if step == PLAN["at"]:
            mark(rank, "at", beh)
            act(rank, beh, loader_iter)
        if loader_iter is not None:
            next(loader_iter)
        if beh == "mismatch" and step >= PLAN["at"]:
            dist.broadcast(t, src=0)
        else:
            dist.all_reduce(t)
        print("rank %d step %d value %g" % (rank, step, t[0].item()), flush=True)
        t.fill_(1)
        step += 1
        time.sleep(PLAN["pace"])
    dist.destroy_process_group()
    mark(rank, "done")


def spawned(index):
    run(index)


def main():
    mode = sys.argv[1]
    if mode == "rank":
        for k in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
            if k in os.environ:
                run(int(os.environ[k]))
                return
        sys.exit("no rank in the environment")
    # The launchers set the rendezvous in os.environ, as training scripts
    # do: their own /proc/PID/environ does not show it, their children's do.
    os.environ["MASTER_ADDR"] = PLAN["master_addr"]
    os.environ["MASTER_PORT"] = str(PLAN["master_port"])
    if mode == "spawn":
        import torch.multiprocessing as mp

        mp.spawn(spawned, nprocs=PLAN["ranks"], join=True)
    elif mode == "launch":
        procs = []
        for r in range(PLAN["ranks"]):
            env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(PLAN["world"]),
                       LOCAL_WORLD_SIZE=str(PLAN["ranks"]))
            procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "rank"], env=env))
        codes = [p.wait() for p in procs]
        sys.exit(next((c for c in codes if c != 0), 0))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    if PLAN.get("record"):
        from torch.distributed.elastic.multiprocessing.errors import record

        main = record(main)
    main()
