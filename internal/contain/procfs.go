package contain

import (
	"context"
	"errors"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// The run's processes are read through proctab, ncclwiz's one process
// model, on the real /proc (in the keeper, its own namespace's /proc).

// procHost is the real machine for proctab's reads. It is built by hand
// rather than with host.Local: the keeper reads /proc only and needs no
// NVML, network, commands or copy of the environment.
func procHost() *host.Host { return &host.Host{Kind: "local", Name: "contain", Root: "/"} }

// readStat reads one process's stat: PID and start time name it exactly,
// so a reused PID is never mistaken for it.
func readStat(pid int) (proctab.Process, bool) {
	p, err := proctab.ReadStat(procHost(), pid)
	return p, err == nil
}

// alive reports whether the process is running (not a zombie).
func alive(p proctab.Process) bool { return !p.Zombie() }

// table reads every process's stat (stat alone: it is polled while a run
// is ended); unreadable entries are skipped. It is nil when /proc cannot
// be listed.
func table() *proctab.Table {
	t, err := proctab.Read(context.Background(), procHost(), proctab.Options{StatOnly: true})
	if err != nil {
		return nil
	}
	return t
}

// hasEnv reports whether the process's environment holds kv ("KEY=VALUE")
// exactly. Unreadable environments (other users', without root) do not.
func hasEnv(pid int, kv string) bool {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return false
	}
	env, readable := proctab.Environ(context.Background(), procHost(), pid, k)
	got, set := env[k]
	return readable && set && got == v
}

// maxCommand bounds a reported command line.
const maxCommand = 300

// Cmdline is the process's argv joined by spaces, shortened; "" when
// unreadable (a kernel thread, or gone).
func Cmdline(pid int) string {
	argv, err := proctab.Cmdline(context.Background(), procHost(), pid)
	if err != nil {
		return ""
	}
	s := strings.Join(argv, " ")
	if len(s) > maxCommand {
		s = s[:maxCommand] + "…"
	}
	return s
}

// nsLocal returns the process's PID and process group in its innermost
// PID namespace (the last numbers of status's NSpid and NSpgid lines).
func nsLocal(pid int) (nspid, nspgid int, ok bool) {
	p, err := proctab.ReadStatus(procHost(), pid)
	if err != nil || len(p.NSpid) == 0 || len(p.NSpgid) == 0 {
		return 0, 0, false
	}
	return p.NSpid[len(p.NSpid)-1], p.NSpgid[len(p.NSpgid)-1], true
}

// killExact sends sig to the process only if it is still the one seen
// (same start time). A pidfd pins the process between the check and the
// signal, so a PID reused meanwhile is never signalled.
func killExact(pid int, start uint64, sig unix.Signal) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ENOSYS) {
		// Kernels before 5.3: check, then signal (a tiny window).
		if now, ok := readStat(pid); !ok || now.StartTicks != start {
			return nil
		}
		return unix.Kill(pid, sig)
	}
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return err
	}
	defer unix.Close(fd)
	if now, ok := readStat(pid); !ok || now.StartTicks != start {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}
