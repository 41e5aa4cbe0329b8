"""A dead job's leftover rank, for the wizard's classic-story test.

launcher mode (python3 job.py launcher SHMDIR READYFILE): starts one rank as
torchrun would (RANK, LOCAL_RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID, MASTER_*
in its environment), waits until it is ready, and exits: the rank loses its
launcher and is adopted by the PID namespace's init.

rank mode: ignores SIGTERM (as a rank stuck in a collective with a handler
that never returns does), creates an NCCL-named segment in SHMDIR, keeps it
open and mapped, dates it an hour back (segments of a dead job are old),
says it is ready, and sleeps without using CPU.
"""
import mmap
import os
import signal
import subprocess
import sys
import time


def launcher(shm, ready):
    env = dict(os.environ, RANK="0", LOCAL_RANK="0", WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", GROUP_RANK="0",
               TORCHELASTIC_RUN_ID="story-run", MASTER_ADDR="127.0.0.1", MASTER_PORT="29777")
    subprocess.Popen([sys.executable, __file__, "rank", shm, ready], env=env, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(500):
        if os.path.exists(ready):
            return
        time.sleep(0.01)
    sys.exit("the rank did not start")


def rank(shm, ready):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    path = os.path.join(shm, "nccl-story-held")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(fd, 1 << 20)
    m = mmap.mmap(fd, 1 << 20)
    m[:4] = b"NCCL"
    old = time.time() - 3600
    os.utime(path, (old, old))
    with open(ready + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(ready + ".tmp", ready)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    {"launcher": launcher, "rank": rank}[sys.argv[1]](sys.argv[2], sys.argv[3])
