// Package realjob is the real-job test bed: it starts REAL distributed jobs
// — Debian's torch (CPU, gloo) under its real launchers, and Open MPI's
// mpirun — whose ranks each do what the test asks, so that `ncclwiz hang`,
// proc.stale and the log explainer are tested against software nobody here
// wrote. Only /usr/bin/python3, /usr/bin/torchrun and /usr/bin/mpirun are
// used (another python3 on PATH has no Debian torch).
//
//	j := realjob.Start(t, realjob.Spec{Launcher: realjob.TorchrunStatic,
//		Behave: map[int]realjob.Behaviour{1: realjob.Sleep}})
//	j.WaitReady(2 * time.Minute)      // every rank where the test wants it
//	j.Launchers(), j.Ranks()          // host PIDs
//	code, err := j.Wait(time.Minute)  // jobs that end: exit code, j.Output()
//
// Each rank runs job.py (embedded): init_process_group("gloo"), then every
// step an all_reduce and one printed line, Spec.Pace apart; from step
// Spec.At on, a rank named in Spec.Behave does its Behaviour. Ranks write
// markers into the job's private directory (rankN.start, .init, .at, .done)
// and WaitReady waits for them and then for the blocking ranks' main
// threads to sleep (or stop) in two reads 100 ms apart, so a test samples a
// job in the state it asked for, however loaded the machine is.
// Every process of a job carries REALJOB_TOKEN; when the test ends (or the
// next test binary finds a job whose REALJOB_OWNER is dead) every process
// with that token is SIGKILLed, orphans included, the container and image
// removed and the directory deleted. Require skips, with the reason, when
// torch, mpirun, docker, unshare or root is missing, and under the race
// detector (CI runs the packages twice; the jobs are the same Python).
//
// # What was tried, with which versions
//
// Debian 12's python3-torch 1.13.1+dfsg-4 (torch.__version__ 1.13.0a0, CPU
// only, gloo; Python 3.11.2) and openmpi-bin 4.1.4-3, Docker Engine
// 20.10.24, Linux 6.18, on 2 loaded cores. Every launcher ran with the
// ranks stuck (Sleep) on the host; those marked ns/docker/nobody also ran
// in a PID namespace, in a container, and as the user nobody:
//
//   - TorchrunStatic — torchrun --redirects 1 --tee 1 --master_port P (the
//     launcher hosts the TCPStore); host, ns, docker, nobody. Debian's
//     torchrun crashes on Python 3.11 with its default flags before any
//     rank starts; --redirects 1 --tee 1 avoids that bug (see commands).
//   - TorchrunC10d — --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:P; host.
//   - TorchrunTwo — two launchers, --nnodes 2, the same --rdzv_id; host,
//     ns (nobody), docker (nobody). The second launcher logs that it could
//     not bind the rendezvous port and joins as a client.
//   - Spawn — torch.multiprocessing.spawn; host, ns (nobody).
//   - Subprocess — a python parent that Popen()s each rank with RANK; host.
//   - MPI — mpirun --allow-run-as-root --oversubscribe -np N (each rank in
//     its own process group); host, docker.
//   - SlurmStep — srun --overcommit -n N on a single-host Slurm 22.05
//     (internal/slurmtest, started for the job and stopped after it; up in
//     about a second): the ranks are children of "slurmstepd: [J.0]" and
//     read SLURM_PROCID; host. SlurmBatch — sbatch --wait of the same srun
//     (a second slurmstepd, [J.batch], runs the script); host.
//
// Behaviours (torchrun static and the subprocess launcher, on the host):
//
//   - Healthy, and Healthy with Steps (ends with exit 0).
//   - Sleep (main thread in hrtimer_nanosleep, the others in
//     futex_do_wait), Spin (R), BlockIO (pipe_read), StopSelf (T) and Job.Stop.
//   - DState: the main thread in D, wait channel kernel_clone (Linux 6.18):
//     clone(CLONE_VM|CLONE_VFORK) of a child that runs libc's pause() on its
//     own stack. Chosen over a FUSE mount whose daemon is stopped or an NFS
//     hard mount: no daemon, module or mount to leave behind, and the vfork
//     wait is killable (TASK_KILLABLE), so Close always ends it. SIGTERM
//     ends it too here, because Python has no SIGTERM handler and a fatal
//     signal ends a killable wait; a truly uninterruptible wait would not.
//   - Exit (status 3), Raise (IndexError: list index out of range; the
//     others fail with gloo's "Connection closed by peer"), SigKill,
//     SigSegv (torchrun: "exitcode: -11"; the others "Connection reset by
//     peer", then "Sending process N closing signal SIGTERM"), LoaderKilled
//     ("DataLoader worker (pid N) is killed by signal: Killed.").
//   - Mismatch: without TORCH_DISTRIBUTED_DEBUG every rank waits in
//     futex_do_wait for good; with DETAIL every rank raises "Detected
//     mismatch between collectives on ranks".
//   - Absent (never reaches init_process_group) and Spec.Missing (the world
//     size counts ranks that never start): the others wait in the rendezvous.
//   - Rendezvous Unreachable (TimeoutError: The client socket has timed out
//     after 5s while trying to connect to (192.0.2.1, P), with Timeout 5 s)
//     and Occupied (torchrun: "The server socket has failed to bind to
//     [::]:P (errno: 98 - Address already in use)").
//
// # Where
//
// Host jobs lead their own process group and get SIGKILL if the test binary
// dies (Pdeathsig). PIDNamespace wraps the launcher in `unshare -fp
// --mount-proc --kill-child` (and `setpriv` for another user): the launcher
// is PID 1 of the namespace. NetNamespace adds -n (a network namespace with
// its own loopback, brought up by a sh that then execs the launcher). Docker runs `docker import` of an empty rootfs
// (bin, lib, lib64, sbin as links into usr, like Debian's merged /usr) with
// the host's /usr and /etc bind-mounted read-only and the job's directory
// at the same path: no registry, no copy of torch, the container's own PID,
// mount and network namespaces (--network none, a host name that resolves
// to loopback for c10d). debootstrap would build a real Debian rootfs but
// takes minutes and hundreds of MiB; the bind mounts run the very same
// Debian files. The launcher is the container's PID 1 (sh execs it).
package realjob
