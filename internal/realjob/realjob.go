package realjob

import (
	"bytes"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/shellquote"
	"github.com/ncclwiz/ncclwiz/internal/slurmtest"
)

//go:embed job.py
var jobPy []byte

// Interpreter and launchers, by absolute path: another python3 (a venv, a
// conda env) may come first on PATH, and it has no Debian torch.
const (
	Python   = "/usr/bin/python3"
	Torchrun = "/usr/bin/torchrun" // Debian's console script; its shebang is /usr/bin/python3.11
	Mpirun   = "/usr/bin/mpirun"
	Srun     = "/usr/bin/srun"
	Sbatch   = "/usr/bin/sbatch"
)

// Launcher is how the ranks are started.
type Launcher string

// Launchers.
const (
	// TorchrunStatic is torchrun with its default static rendezvous: the
	// launcher hosts the job's TCPStore on --master_port and the ranks use
	// it (TORCHELASTIC_USE_AGENT_STORE).
	TorchrunStatic Launcher = "torchrun-static"
	// TorchrunC10d is torchrun with --rdzv_backend c10d on a local endpoint.
	TorchrunC10d Launcher = "torchrun-c10d"
	// TorchrunTwo is two torchrun launchers of one job on this machine
	// (--nnodes 2, c10d, the same --rdzv_id): Ranks are split between them,
	// the first launcher taking the larger half.
	TorchrunTwo Launcher = "torchrun-2"
	// Spawn is torch.multiprocessing.spawn: the ranks have no RANK in their
	// environment (the rank is an argument) and inherit MASTER_ADDR/PORT
	// that the parent set in os.environ.
	Spawn Launcher = "mp-spawn"
	// Subprocess is a custom Python launcher: subprocess.Popen of each rank
	// with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT set.
	Subprocess Launcher = "subprocess"
	// MPI is mpirun --allow-run-as-root --oversubscribe -np N: the ranks read
	// OMPI_COMM_WORLD_RANK and meet through gloo (MASTER_ADDR/PORT).
	MPI Launcher = "mpirun"
	// SlurmStep is `srun --overcommit -n N` on a single-host Slurm the job
	// starts for itself (internal/slurmtest): the ranks are children of
	// slurmstepd, read SLURM_PROCID and meet through gloo.
	SlurmStep Launcher = "srun"
	// SlurmBatch is `sbatch --wait` of a script that runs the same srun:
	// the step runs beside the batch script's own slurmstepd.
	SlurmBatch Launcher = "sbatch"
)

// Launchers lists every launcher, for table tests.
var Launchers = []Launcher{TorchrunStatic, TorchrunC10d, TorchrunTwo, Spawn, Subprocess, MPI, SlurmStep, SlurmBatch}

// Behaviour is what one rank does from step Spec.At on.
type Behaviour string

// Behaviours.
const (
	// Healthy ranks all_reduce and print one line every step.
	Healthy Behaviour = "healthy"
	// Sleep: time.sleep before its next all_reduce (the others wait in gloo).
	Sleep Behaviour = "sleep"
	// Spin: a busy Python loop before its next all_reduce.
	Spin Behaviour = "spin"
	// BlockIO: blocks reading a FIFO nobody writes (state S, pipe_read).
	BlockIO Behaviour = "block-io"
	// StopSelf: SIGSTOPs itself (Job.Stop stops a rank from the test).
	StopSelf Behaviour = "sigstop"
	// Exit: prints a line and exits with status 3.
	Exit Behaviour = "exit"
	// Raise: an IndexError (list index out of range) in pick_batch.
	Raise Behaviour = "raise"
	// SigKill: SIGKILLs itself.
	SigKill Behaviour = "sigkill"
	// SigSegv: a real segmentation fault (ctypes reads address 0).
	SigSegv Behaviour = "sigsegv"
	// Absent: the process runs but never arrives: it sleeps before
	// init_process_group, so the others wait in the rendezvous.
	Absent Behaviour = "absent"
	// Mismatch: calls broadcast where the others call all_reduce (set
	// TORCH_DISTRIBUTED_DEBUG=DETAIL in Spec.Env for the check that detects it).
	Mismatch Behaviour = "mismatch"
	// LoaderKilled: its DataLoader worker (num_workers=1) is SIGKILLed; the
	// next batch raises "DataLoader worker (pid N) is killed by signal".
	LoaderKilled Behaviour = "loader-killed"
	// DState: its main thread sits in uninterruptible sleep (D, wait
	// channel kernel_clone): it clone()s a CLONE_VFORK child that runs
	// pause() and never execs. No slow storage needed, and unlike a hung
	// NFS or FUSE wait it is killable, so the test can always clean up.
	DState Behaviour = "d-state"
)

// Behaviours lists every behaviour, for table tests.
var Behaviours = []Behaviour{Healthy, Sleep, Spin, BlockIO, StopSelf, Exit, Raise, SigKill, SigSegv, Absent, Mismatch, LoaderKilled, DState}

// blocks: the rank stays (alive) where its behaviour put it.
func (b Behaviour) blocks() bool {
	switch b {
	case Sleep, Spin, BlockIO, StopSelf, Absent, DState:
		return true
	}
	return false
}

// Ends reports whether the rank ends (or makes its gloo job end) soon
// after its behaviour point: a test then waits for the job (Job.Wait)
// rather than for readiness.
func (b Behaviour) Ends() bool {
	switch b {
	case Exit, Raise, SigKill, SigSegv, LoaderKilled:
		return true
	}
	return false
}

// Where is where the job runs.
type Where string

// Places.
const (
	// Host: in the test's own namespaces.
	Host Where = "host"
	// PIDNamespace: unshare -fp --mount-proc: the launcher is PID 1 of a new
	// PID namespace (two launchers: a sh that waits for both is PID 1).
	PIDNamespace Where = "pid-namespace"
	// NetNamespace: PIDNamespace in a network namespace of its own too
	// (unshare -fpn, loopback brought up), as a container without a
	// network has: its 127.0.0.1 is not the host's.
	NetNamespace Where = "pid-net-namespace"
	// Docker: a container whose PID 1 is the launcher, in its own network
	// namespace (--network none); the image is an empty rootfs (docker
	// import) with the host's /usr and /etc bind-mounted read-only.
	Docker Where = "docker"
)

// Rendezvous troubles.
const (
	// Unreachable: the ranks are told to meet at 192.0.2.1 (TEST-NET-1,
	// RFC 5737), where nothing answers.
	Unreachable = "unreachable"
	// Occupied: another process (the test) listens on the rendezvous port.
	Occupied = "occupied"
)

// Spec says which job to start.
type Spec struct {
	Launcher Launcher
	// Ranks is the number of ranks started (default 3).
	Ranks int
	// Missing ranks are part of the job's world size but never start: the
	// others wait for them in init_process_group.
	Missing int
	// Behave gives the behaviour of a global rank; the others are Healthy.
	Behave map[int]Behaviour
	// At is the step at which the behaviours start (default 2).
	At int
	// Steps ends a healthy job after this many steps (0: it runs until the
	// test ends).
	Steps int
	// Pace is the pause between steps (default 100 ms).
	Pace time.Duration
	// Timeout is init_process_group's timeout, which gloo also uses for
	// its collectives (default 10 minutes).
	Timeout time.Duration
	// Env is added to the launcher's environment (e.g.
	// TORCH_DISTRIBUTED_DEBUG=DETAIL).
	Env map[string]string
	// User runs the job as this user ("nobody"); "" is the test's own user.
	// Another user needs root.
	User string
	// Where the job runs (default Host).
	Where Where
	// Rendezvous is "", Unreachable or Occupied.
	Rendezvous string
	// Tee is torchrun's --tee: 0 or 1 tees the ranks' stdout with a
	// [defaultN]: prefix (their stderr reaches the console unprefixed); 2
	// tees their stderr with the prefix instead (stdout then only goes to
	// torchrun's log files). 3 (both) crashes torch 1.13's torchrun on
	// Python 3.11, as 0 does.
	Tee int
	// Record wraps the ranks' entrypoint in torch.distributed.elastic's
	// @record: a failing rank writes its error file and torchrun's failure
	// table shows its traceback.
	Record bool
}

func (s Spec) withDefaults() Spec {
	if s.Launcher == "" {
		s.Launcher = TorchrunStatic
	}
	if s.Ranks <= 0 {
		s.Ranks = 3
	}
	if s.At <= 0 {
		s.At = 2
	}
	if s.Pace <= 0 {
		s.Pace = 100 * time.Millisecond
	}
	if s.Timeout <= 0 {
		s.Timeout = 10 * time.Minute
	}
	if s.Where == "" {
		s.Where = Host
	}
	return s
}

func (s Spec) behaviour(rank int) Behaviour {
	if b, ok := s.Behave[rank]; ok && b != "" {
		return b
	}
	return Healthy
}

// blocked: some rank stops the others from passing a collective.
func (s Spec) blocked() bool {
	if s.Missing > 0 {
		return true
	}
	for _, b := range s.Behave {
		if b.blocks() || b == Mismatch {
			return true
		}
	}
	return false
}

// stuckInInit: the ranks cannot pass init_process_group.
func (s Spec) stuckInInit() bool {
	if s.Missing > 0 || s.Rendezvous != "" {
		return true
	}
	for _, b := range s.Behave {
		if b == Absent {
			return true
		}
	}
	return false
}

// Job is a started job. Its processes are killed, its container removed
// and its directory deleted when the test ends.
type Job struct {
	t     testing.TB
	spec  Spec
	dir   string
	token string
	// started are the processes this package started (the launcher, or
	// unshare, or the docker client of a detached run).
	started   []*exec.Cmd
	container string
	image     string
	occupier  net.Listener

	mu        sync.Mutex
	exits     []int
	waited    int
	done      chan struct{}
	launchers []int
	closed    bool
}

// Require skips t, with the reason, unless s can run here: torch (and
// mpirun, docker, unshare) installed, root for another user, a PID
// namespace or Docker. Under the race detector real jobs are skipped: CI
// runs the packages that use them twice (plain and -race), the jobs are
// the same Python both times, and two rounds would double the time.
func Require(t testing.TB, s Spec) {
	t.Helper()
	s = s.withDefaults()
	if testing.Short() {
		t.Skip("starts a real torch job (-short)")
	}
	if race {
		t.Skip("real jobs run in the plain test run, not again under the race detector")
	}
	if err := torchOK(); err != nil {
		t.Skipf("no Debian torch at %s: %v (apt-get install python3-torch)", Python, err)
	}
	if s.Launcher == MPI {
		if _, err := os.Stat(Mpirun); err != nil {
			t.Skipf("no %s (apt-get install openmpi-bin)", Mpirun)
		}
	}
	if (s.Launcher == SlurmStep || s.Launcher == SlurmBatch) && s.Where != Host {
		t.Fatalf("realjob: a Slurm job runs on the host (slurmd starts its ranks)")
	}
	if strings.HasPrefix(string(s.Launcher), "torchrun") {
		if _, err := os.Stat(Torchrun); err != nil {
			t.Skipf("no %s (apt-get install python3-torch)", Torchrun)
		}
	}
	if (s.User != "" || s.Where != Host) && os.Geteuid() != 0 {
		t.Skipf("a job as %q in %s needs root", s.User, s.Where)
	}
	switch s.Where {
	case PIDNamespace, NetNamespace:
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Skip("unshare is not installed (util-linux)")
		}
		if _, err := exec.LookPath("ip"); err != nil && s.Where == NetNamespace {
			t.Skip("ip is not installed (iproute2)")
		}
		if _, err := exec.LookPath("setpriv"); err != nil && s.User != "" {
			t.Skip("setpriv is not installed (util-linux)")
		}
	case Docker:
		if _, err := exec.LookPath("docker"); err != nil {
			t.Skip("docker is not installed")
		}
		if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
			t.Skipf("no Docker Engine: %v %s", err, firstLine(string(out)))
		}
	}
	if s.User != "" {
		if _, _, err := lookupUser(s.User); err != nil {
			t.Skipf("user %s: %v", s.User, err)
		}
	}
}

var (
	torchOnce sync.Once
	torchErr  error
)

func torchOK() error {
	torchOnce.Do(func() {
		out, err := exec.Command(Python, "-c", "import torch.distributed as d; assert d.is_gloo_available()").CombinedOutput()
		if err != nil {
			torchErr = fmt.Errorf("%v: %s", err, lastLines(string(out), 2))
		}
	})
	return torchErr
}

// Start starts the job s describes (after Require) and returns at once;
// call WaitReady before looking at it.
func Start(t testing.TB, s Spec) *Job {
	t.Helper()
	Require(t, s)
	s = s.withDefaults()
	sweepOnce.Do(sweepOrphans)
	j := &Job{t: t, spec: s, token: unique(t), done: make(chan struct{})}
	var err error
	j.dir, err = os.MkdirTemp("", "realjob-")
	if err != nil {
		t.Fatalf("realjob: %v", err)
	}
	t.Cleanup(j.Close)
	uid, gid := os.Getuid(), os.Getgid()
	if s.User != "" {
		uid, gid, _ = lookupUser(s.User)
	}
	if err := os.Chmod(j.dir, 0o755); err != nil {
		t.Fatalf("realjob: %v", err)
	}
	for _, d := range []string{"home"} {
		if err := os.Mkdir(filepath.Join(j.dir, d), 0o755); err != nil {
			t.Fatalf("realjob: %v", err)
		}
	}
	if err := os.WriteFile(j.script(), jobPy, 0o644); err != nil {
		t.Fatalf("realjob: %v", err)
	}
	if err := os.WriteFile(j.outPath(), nil, 0o644); err != nil {
		t.Fatalf("realjob: %v", err)
	}
	if s.User != "" {
		for _, p := range []string{j.dir, filepath.Join(j.dir, "home"), j.outPath()} {
			if err := os.Chown(p, uid, gid); err != nil {
				t.Fatalf("realjob: %v", err)
			}
		}
	}
	masterPort, rdzvPort := freePort(t), freePort(t)
	masterAddr := "127.0.0.1"
	switch s.Rendezvous {
	case "":
	case Unreachable:
		masterAddr = "192.0.2.1"
	case Occupied:
		l, err := net.Listen("tcp", ":"+strconv.Itoa(masterPort))
		if err != nil {
			t.Fatalf("realjob: occupy the rendezvous port: %v", err)
		}
		j.occupier = l
		rdzvPort = masterPort
	default:
		t.Fatalf("realjob: unknown rendezvous %q", s.Rendezvous)
	}
	behave := map[string]string{}
	for r, b := range s.Behave {
		behave[strconv.Itoa(r)] = string(b)
	}
	plan, _ := json.Marshal(map[string]any{
		"ranks": s.Ranks, "world": s.Ranks + s.Missing, "behave": behave, "at": s.At, "steps": s.Steps,
		"pace": s.Pace.Seconds(), "timeout": s.Timeout.Seconds(), "master_addr": masterAddr, "master_port": masterPort,
		"record": s.Record,
	})
	env := map[string]string{
		"PATH": "/usr/bin:/bin", "HOME": filepath.Join(j.dir, "home"), "LANG": "C.UTF-8",
		"REALJOB_PLAN": string(plan), "REALJOB_DIR": j.dir, "REALJOB_TOKEN": j.token,
		"REALJOB_OWNER": owner(),
		// gloo binds the address the host name resolves to; a container's or
		// CI's name may not resolve, so every job uses loopback.
		"GLOO_SOCKET_IFNAME": "lo",
		// One compute thread per rank: 2 cores run several jobs at once.
		"OMP_NUM_THREADS": "1",
		// The launcher's own prints (torchrun's tee of the ranks) reach output.log as they happen.
		"PYTHONUNBUFFERED": "1",
	}
	switch s.Launcher {
	case MPI, SlurmStep, SlurmBatch:
		// mpirun and srun start the ranks directly; they meet through gloo.
		env["MASTER_ADDR"], env["MASTER_PORT"] = masterAddr, strconv.Itoa(masterPort)
	}
	if s.Launcher == SlurmStep || s.Launcher == SlurmBatch {
		// Its own Slurm, stopped after the job (cleanups run last first).
		// srun passes the whole environment, the token too, to the ranks.
		env["SLURM_CONF"] = slurmtest.Start(j.t).Conf
	}
	for k, v := range s.Env {
		env[k] = v
	}
	cmds := j.commands(masterAddr, masterPort, rdzvPort)
	switch s.Where {
	case Docker:
		j.startDocker(cmds, env, uid, gid)
	default:
		j.startLocal(cmds, env, uid, gid)
	}
	return j
}

// commands are the launcher command lines of the job.
func (j *Job) commands(masterAddr string, masterPort, rdzvPort int) [][]string {
	s := j.spec
	// Debian's torchrun (torch 1.13) crashes on Python 3.11 with its default
	// flags before any rank starts: Std.from_str("0") returns None because
	// Python 3.11's IntFlag iteration skips 0 (AttributeError: 'NoneType'
	// object has no attribute 'get'). --redirects 1 --tee 1 avoids that code
	// path: each rank's stdout goes to /tmp/torchelastic_*/…/stdout.log and
	// is tee'd to the console with a [defaultN]: prefix.
	tee := "1"
	if s.Tee == 2 {
		tee = "2"
	}
	torchrun := func(nnodes, nproc int, extra ...string) []string {
		c := []string{Torchrun, "--redirects", "1", "--tee", tee, "--nnodes", strconv.Itoa(nnodes), "--nproc_per_node", strconv.Itoa(nproc)}
		c = append(c, extra...)
		return append(c, j.script(), "rank")
	}
	rdzv := func(id string) []string {
		return []string{"--rdzv_backend", "c10d", "--rdzv_endpoint", masterAddr + ":" + strconv.Itoa(rdzvPort), "--rdzv_id", id}
	}
	switch s.Launcher {
	case TorchrunStatic:
		return [][]string{torchrun(1, s.Ranks, "--master_addr", masterAddr, "--master_port", strconv.Itoa(masterPort))}
	case TorchrunC10d:
		return [][]string{torchrun(1, s.Ranks, rdzv("realjob-"+j.token)...)}
	case TorchrunTwo:
		if s.Ranks < 2 {
			j.t.Fatalf("realjob: two launchers need at least 2 ranks")
		}
		first := (s.Ranks + 1) / 2
		id := "realjob-" + j.token
		return [][]string{torchrun(2, first, rdzv(id)...), torchrun(2, s.Ranks-first, rdzv(id)...)}
	case Spawn:
		return [][]string{{Python, j.script(), "spawn"}}
	case Subprocess:
		return [][]string{{Python, j.script(), "launch"}}
	case MPI:
		return [][]string{{Mpirun, "--allow-run-as-root", "--oversubscribe", "-np", strconv.Itoa(s.Ranks), Python, j.script(), "rank"}}
	case SlurmStep:
		// --overcommit: the node has fewer CPUs than ranks.
		return [][]string{{Srun, "--overcommit", "-n", strconv.Itoa(s.Ranks), "--job-name", "realjob-" + j.token, Python, j.script(), "rank"}}
	case SlurmBatch:
		script := shellquote.Join([]string{Srun, Python, j.script(), "rank"})
		return [][]string{{Sbatch, "--wait", "--overcommit", "-n", strconv.Itoa(s.Ranks), "--job-name", "realjob-" + j.token,
			"--output", j.outPath(), "--open-mode", "append", "--wrap", script}}
	}
	j.t.Fatalf("realjob: unknown launcher %q", s.Launcher)
	return nil
}

// oneCommand joins several launchers into one sh that starts them all and
// waits (PID 1 of a namespace or container must be one process).
func oneCommand(cmds [][]string) []string {
	if len(cmds) == 1 {
		return cmds[0]
	}
	var start, wait []string
	for i, c := range cmds {
		start = append(start, fmt.Sprintf("%s & p%d=$!;", shellquote.Join(c), i))
		wait = append(wait, fmt.Sprintf(`wait "$p%d" || rc=${rc:-$?};`, i))
	}
	// The exit status is the first failing launcher's.
	script := strings.Join(start, " ") + " " + strings.Join(wait, " ") + " exit ${rc:-0}"
	return []string{"/bin/sh", "-c", script}
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func (j *Job) startLocal(cmds [][]string, env map[string]string, uid, gid int) {
	s := j.spec
	if s.Where == PIDNamespace || s.Where == NetNamespace {
		argv := []string{"unshare", "-fp", "--mount-proc", "--kill-child", "--"}
		if s.Where == NetNamespace {
			// A new network namespace has loopback down; sh brings it up
			// and execs the launcher, which stays PID 1.
			argv = []string{"unshare", "-fpn", "--mount-proc", "--kill-child", "--", "/bin/sh", "-c", `ip link set lo up && exec "$@"`, "sh"}
		}
		if s.User != "" {
			argv = append(argv, "setpriv", "--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(gid), "--clear-groups", "--")
		}
		cmds = [][]string{append(argv, oneCommand(cmds)...)}
	}
	out, err := os.OpenFile(j.outPath(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		j.t.Fatalf("realjob: %v", err)
	}
	defer out.Close()
	j.exits = make([]int, len(cmds))
	for i, argv := range cmds {
		c := exec.Command(argv[0], argv[1:]...)
		c.Env = envList(env)
		c.Dir = j.dir
		c.Stdout, c.Stderr = out, out
		// Its own process group (the test's Ctrl-C is not the job's), and
		// SIGKILL if the test binary dies first.
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if s.User != "" && s.Where == Host {
			c.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
		}
		if err := c.Start(); err != nil {
			j.t.Fatalf("realjob: start %v: %v", argv, err)
		}
		j.started = append(j.started, c)
		go func(i int, c *exec.Cmd) {
			err := c.Wait()
			code := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				code = ee.ExitCode()
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					code = 128 + int(ws.Signal())
				}
			} else if err != nil {
				code = -1
			}
			j.exited(i, code)
		}(i, c)
	}
}

func (j *Job) exited(i, code int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.exits[i] = code
	j.waited++
	if j.waited == len(j.exits) {
		close(j.done)
	}
}

func (j *Job) startDocker(cmds [][]string, env map[string]string, uid, gid int) {
	s := j.spec
	root := filepath.Join(j.dir, "rootfs")
	for _, d := range []string{"usr", "etc", "tmp", "proc", "sys", "dev", "root", "var/tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			j.t.Fatalf("realjob: %v", err)
		}
	}
	_ = os.Chmod(filepath.Join(root, "tmp"), os.ModeSticky|0o777)
	// Debian 12 has a merged /usr: /bin, /lib, /lib64 and /sbin are links
	// into it, so binding /usr (and /etc) gives the container Debian's
	// python3, torch and Open MPI without a registry or a copy.
	for _, l := range []string{"bin", "lib", "lib64", "sbin"} {
		if err := os.Symlink("usr/"+l, filepath.Join(root, l)); err != nil {
			j.t.Fatalf("realjob: %v", err)
		}
	}
	j.image = "realjob-hang:" + j.token
	tarc := exec.Command("tar", "-C", root, "-c", ".")
	imp := exec.Command("docker", "import", "-", j.image)
	pipe, err := tarc.StdoutPipe()
	if err != nil {
		j.t.Fatalf("realjob: %v", err)
	}
	imp.Stdin = pipe
	if err := tarc.Start(); err != nil {
		j.t.Fatalf("realjob: tar: %v", err)
	}
	if out, err := imp.CombinedOutput(); err != nil {
		_ = tarc.Wait()
		j.t.Fatalf("realjob: docker import: %v %s", err, out)
	}
	_ = tarc.Wait()
	j.container = "realjob-hang-" + j.token
	// --network none gives the container its own network namespace with
	// loopback only; its host name must resolve (c10d rendezvous looks it up).
	argv := []string{"run", "-d", "--name", j.container, "--network", "none", "--hostname", "realjob", "--add-host", "realjob:127.0.0.1", "-w", j.dir,
		"-v", "/usr:/usr:ro", "-v", "/etc:/etc:ro", "-v", j.dir + ":" + j.dir}
	if s.User != "" {
		argv = append(argv, "--user", fmt.Sprintf("%d:%d", uid, gid))
	}
	for _, kv := range envList(env) {
		argv = append(argv, "-e", kv)
	}
	// sh execs the launcher, so the launcher is the container's PID 1 and
	// its output goes to the job's file like on the host.
	inner := shellquote.Join(oneCommand(cmds))
	argv = append(argv, j.image, "/bin/sh", "-c", "exec "+inner+" >>"+shellquote.Quote(j.outPath())+" 2>&1")
	if out, err := exec.Command("docker", argv...).CombinedOutput(); err != nil {
		j.t.Fatalf("realjob: docker run: %v %s", err, out)
	}
	j.exits = make([]int, 1)
	go func() {
		out, err := exec.Command("docker", "wait", j.container).Output()
		code, perr := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil || perr != nil {
			code = -1
		}
		j.exited(0, code)
	}()
}

// Spec returns the job's spec, defaults filled in.
func (j *Job) Spec() Spec { return j.spec }

// Dir is the job's private directory: the script, the markers, output.log.
func (j *Job) Dir() string { return j.dir }

// Token is the value of REALJOB_TOKEN in every process of the job.
func (j *Job) Token() string { return j.token }

// Container is the Docker container's name ("" outside Docker).
func (j *Job) Container() string { return j.container }

func (j *Job) script() string  { return filepath.Join(j.dir, "job.py") }
func (j *Job) outPath() string { return filepath.Join(j.dir, "output.log") }

// Output returns the job's combined output so far (the launchers' stdout
// and stderr, which carry the ranks' output too).
func (j *Job) Output() string {
	b, _ := os.ReadFile(j.outPath())
	return string(b)
}

// Done is closed when every launcher has exited.
func (j *Job) Done() <-chan struct{} { return j.done }

// Wait waits up to limit for the job to end and returns its exit code (a
// launcher killed by a signal: 128+signal; several launchers: the first
// non-zero).
func (j *Job) Wait(limit time.Duration) (int, error) {
	select {
	case <-j.done:
	case <-time.After(limit):
		return 0, fmt.Errorf("the job did not end within %s; output:\n%s", limit, lastLines(j.Output(), 20))
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, c := range j.exits {
		if c != 0 {
			return c, nil
		}
	}
	return 0, nil
}

func (j *Job) ended() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// marker reads rank r's marker (start, init, at, done): the rank's PID in
// its own namespace, or 0.
func (j *Job) marker(r int, what string) int {
	b, err := os.ReadFile(filepath.Join(j.dir, fmt.Sprintf("rank%d.%s", r, what)))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// want is the marker that says rank r is where the test wants it.
func (j *Job) want(r int) string {
	b := j.spec.behaviour(r)
	if j.spec.stuckInInit() && b != Absent {
		return "init"
	}
	if j.spec.Steps > 0 && j.spec.Steps <= j.spec.At {
		return "done"
	}
	return "at"
}

// WaitReady waits up to limit until every started rank has reached its
// behaviour point (the marker its rank wrote) and, where it blocks, its
// main thread sleeps (or is stopped) in two reads 100 ms apart: a job
// sampled then is in the state the test asked for. It fails the test when
// the job ends first or limit passes.
func (j *Job) WaitReady(limit time.Duration) {
	j.t.Helper()
	if err := j.waitReady(limit); err != nil {
		j.t.Fatalf("realjob: %v", err)
	}
}

func (j *Job) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for r := 0; r < j.spec.Ranks; r++ {
		for j.marker(r, j.want(r)) == 0 {
			if j.ended() && j.marker(r, j.want(r)) == 0 {
				return fmt.Errorf("the job ended before rank %d reached %q; output:\n%s", r, j.want(r), lastLines(j.Output(), 30))
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("rank %d did not reach %q within %s; output:\n%s", r, j.want(r), limit, lastLines(j.Output(), 30))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	pids, err := j.rankPIDs()
	if err != nil {
		return err
	}
	j.mu.Lock()
	if j.launchers == nil {
		j.launchers = j.findLaunchers(pids)
	}
	j.mu.Unlock()
	// The state each rank settles in: a rank that waits for a blocked peer,
	// sleeps, blocks in a read or is absent sleeps (S); a stopped one is T.
	expect := map[int]string{}
	for r := 0; r < j.spec.Ranks; r++ {
		b := j.spec.behaviour(r)
		switch {
		case b == StopSelf:
			expect[r] = "T"
		case b == DState:
			expect[r] = "D"
		case b == Sleep || b == BlockIO || b == Absent:
			expect[r] = "S"
		case (b == Healthy || b == Mismatch) && j.spec.blocked():
			expect[r] = "S"
		}
	}
	for prev := map[int]bool{}; ; {
		now := map[int]bool{}
		all := true
		for r, st := range expect {
			ok := procState(pids[r]) == st
			now[r] = ok
			all = all && ok && prev[r]
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ranks did not settle within %s (want %v); output:\n%s", limit, expect, lastLines(j.Output(), 30))
		}
		prev = now
		time.Sleep(100 * time.Millisecond)
	}
}

// procState is the state letter of pid's main thread, or "".
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+3 > len(b) {
		return ""
	}
	return string(b[i+2])
}

// Ranks returns the host PID of each started rank (by global rank), for
// the ranks that have written their start marker and still run.
func (j *Job) Ranks() map[int]int {
	m, err := j.rankPIDs()
	if err != nil {
		j.t.Fatalf("realjob: %v", err)
	}
	return m
}

// Rank returns the host PID of rank r (the test fails if it is not known).
func (j *Job) Rank(r int) int {
	j.t.Helper()
	pid, ok := j.Ranks()[r]
	if !ok {
		j.t.Fatalf("realjob: rank %d is not running; output:\n%s", r, lastLines(j.Output(), 20))
	}
	return pid
}

// Launchers returns the host PIDs of the job's launchers (torchrun, the
// mp.spawn or subprocess parent, mpirun, the step's slurmstepd; in a PID namespace or container,
// the launcher that is PID 1 there, or the sh that waits for two), as
// found when the job became ready. They stay listed after they exit.
func (j *Job) Launchers() []int {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.launchers == nil {
		if pids, err := j.rankPIDs(); err == nil {
			j.launchers = j.findLaunchers(pids)
		}
	}
	return append([]int(nil), j.launchers...)
}

// PIDs returns the host PID of every process of the job that runs now
// (launchers, ranks, their children), found by REALJOB_TOKEN.
func (j *Job) PIDs() []int {
	var out []int
	for _, p := range j.procs() {
		out = append(out, p.pid)
	}
	sort.Ints(out)
	return out
}

type proc struct{ pid, ppid, nspid int }

// procs scans /proc for the processes whose environment holds the job's
// token (root reads every process's; a user, their own).
func (j *Job) procs() []proc {
	return scanToken("REALJOB_TOKEN=" + j.token)
}

func scanToken(needle string) []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !hasVar(env, needle) {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		p := proc{pid: pid, nspid: pid}
		for _, line := range strings.Split(string(st), "\n") {
			k, v, _ := strings.Cut(line, ":")
			f := strings.Fields(v)
			switch {
			case k == "PPid" && len(f) == 1:
				p.ppid, _ = strconv.Atoi(f[0])
			case k == "NSpid" && len(f) > 0:
				p.nspid, _ = strconv.Atoi(f[len(f)-1])
			}
		}
		out = append(out, p)
	}
	return out
}

func hasVar(environ []byte, kv string) bool {
	for _, e := range bytes.Split(environ, []byte{0}) {
		if string(e) == kv {
			return true
		}
	}
	return false
}

// rankPIDs maps each rank's start marker (its PID in its namespace) to
// the host PID of the job's process with that namespace PID.
func (j *Job) rankPIDs() (map[int]int, error) {
	ps := j.procs()
	out := map[int]int{}
	for r := 0; r < j.spec.Ranks; r++ {
		ns := j.marker(r, "start")
		if ns == 0 {
			continue
		}
		for _, p := range ps {
			if p.nspid == ns {
				out[r] = p.pid
			}
		}
	}
	return out, nil
}

// findLaunchers: the parents of the ranks that are the job's processes
// and not ranks.
func (j *Job) findLaunchers(ranks map[int]int) []int {
	ps := j.procs()
	byPID := map[int]proc{}
	for _, p := range ps {
		byPID[p.pid] = p
	}
	seen := map[int]bool{}
	if j.spec.Launcher == SlurmStep || j.spec.Launcher == SlurmBatch {
		// The step's slurmstepd (slurmd's child, no token) starts the ranks.
		out := []int{}
		for _, pid := range ranks {
			if pp := byPID[pid].ppid; pp > 0 && !seen[pp] {
				seen[pp] = true
				out = append(out, pp)
			}
		}
		sort.Ints(out)
		return out
	}
	isRank := map[int]bool{}
	for _, pid := range ranks {
		isRank[pid] = true
	}
	var out []int
	for _, pid := range ranks {
		parent, ok := byPID[byPID[pid].ppid]
		if !ok || isRank[parent.pid] || seen[parent.pid] {
			continue
		}
		seen[parent.pid] = true
		out = append(out, parent.pid)
	}
	if j.spec.Where != Host {
		// The namespace's PID 1 (the launcher, or the sh waiting for two).
		for _, p := range ps {
			if p.nspid == 1 && !seen[p.pid] {
				if j.spec.Launcher == TorchrunTwo {
					out = append(out, p.pid)
				} else {
					out = []int{p.pid}
				}
			}
		}
	}
	sort.Ints(out)
	return out
}

// Signal sends sig to pid if it is a process of this job.
func (j *Job) Signal(pid int, sig syscall.Signal) error {
	for _, p := range j.procs() {
		if p.pid == pid {
			return syscall.Kill(pid, sig)
		}
	}
	return fmt.Errorf("pid %d is not a process of this job", pid)
}

// Stop stops rank r with SIGSTOP (the test stopping it, rather than
// StopSelf) and waits until it is stopped.
func (j *Job) Stop(r int) {
	j.t.Helper()
	pid := j.Rank(r)
	if err := j.Signal(pid, syscall.SIGSTOP); err != nil {
		j.t.Fatalf("realjob: stop rank %d: %v", r, err)
	}
	for i := 0; i < 100 && procState(pid) != "T"; i++ {
		time.Sleep(20 * time.Millisecond)
	}
}

// KillLauncher SIGKILLs the launchers (on the host: in a namespace or
// container the launcher is PID 1 and its death ends every rank) and waits
// until the ranks have been re-parented: they are orphans of a job whose
// launcher is gone.
func (j *Job) KillLauncher() {
	j.t.Helper()
	if j.spec.Where != Host {
		j.t.Fatalf("realjob: KillLauncher only on the host (the launcher is PID 1 of the %s)", j.spec.Where)
	}
	ls := j.Launchers()
	starts := map[int]uint64{}
	for _, pid := range ls {
		starts[pid] = startTicks(pid)
	}
	for _, pid := range ls {
		if err := j.Signal(pid, syscall.SIGKILL); err != nil {
			j.t.Fatalf("realjob: kill launcher %d: %v", pid, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		orphaned := true
		for _, p := range j.procs() {
			for _, l := range ls {
				orphaned = orphaned && p.pid != l && p.ppid != l
			}
		}
		// And the launchers have finished dying: their last threads exit
		// after the ranks are re-parented.
		for _, l := range ls {
			if st := procState(l); st != "" && st != "Z" && st != "X" && startTicks(l) == starts[l] {
				orphaned = false
			}
		}
		if orphaned {
			return
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("realjob: the launchers %v did not go", ls)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close ends the job: it kills every process carrying the job's token
// (orphans too), removes the container and image, and deletes the job's
// directory. Tests need not call it (t.Cleanup does).
func (j *Job) Close() {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return
	}
	j.closed = true
	j.mu.Unlock()
	// Every process of the job as it is now, pinned by start time: those
	// the group kill below ends are no longer found by their token while
	// they die, and must be waited for too.
	seen := map[int]uint64{}
	for _, p := range j.procs() {
		seen[p.pid] = startTicks(p.pid)
	}
	if j.container != "" {
		_ = exec.Command("docker", "rm", "-f", j.container).Run()
	}
	for _, c := range j.started {
		if c.Process != nil {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
	}
	killToken("REALJOB_TOKEN="+j.token, seen)
	if j.image != "" {
		_ = exec.Command("docker", "rmi", "-f", j.image).Run()
	}
	if j.occupier != nil {
		_ = j.occupier.Close()
	}
	if len(j.started) > 0 || j.container != "" {
		select {
		case <-j.done:
		case <-time.After(10 * time.Second):
		}
	}
	_ = os.RemoveAll(j.dir)
}

// killToken SIGKILLs every process carrying needle (stopped ones too)
// until none is left, then waits until each of them and of seen (PID →
// start ticks, processes already signalled) has finished dying: a torch
// process unmapping its memory stays visible, running, for a moment after
// its environment is gone.
func killToken(needle string, seen map[int]uint64) {
	for i := 0; i < 100; i++ {
		ps := scanToken(needle)
		if len(ps) == 0 {
			break
		}
		for _, p := range ps {
			if _, ok := seen[p.pid]; !ok {
				seen[p.pid] = startTicks(p.pid)
			}
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	deadline := time.Now().Add(20 * time.Second)
	for pid, start := range seen {
		for time.Now().Before(deadline) {
			if st := procState(pid); st == "" || st == "Z" || st == "X" || startTicks(pid) != start {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

var sweepOnce sync.Once

// sweepOrphans kills processes of jobs whose test binary died without
// cleaning up (SIGKILL of `go test`): their REALJOB_OWNER names a process
// that no longer runs with that start time.
func sweepOrphans() {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		var token, own string
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("REALJOB_TOKEN=")); ok {
				token = string(v)
			}
			if v, ok := bytes.CutPrefix(kv, []byte("REALJOB_OWNER=")); ok {
				own = string(v)
			}
		}
		if token == "" || own == "" || ownerAlive(own) {
			continue
		}
		killToken("REALJOB_TOKEN="+token, map[int]uint64{})
	}
}

// owner names this test binary: PID and start time.
func owner() string {
	pid := os.Getpid()
	return strconv.Itoa(pid) + ":" + strconv.FormatUint(startTicks(pid), 10)
}

func ownerAlive(own string) bool {
	p, s, ok := strings.Cut(own, ":")
	pid, err := strconv.Atoi(p)
	if !ok || err != nil {
		return true // not ours to judge
	}
	return strconv.FormatUint(startTicks(pid), 10) == s
}

func startTicks(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("realjob: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func unique(t testing.TB) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("realjob: %v", err)
	}
	return hex.EncodeToString(b)
}

func lookupUser(name string) (uid, gid int, err error) {
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) > 3 && f[0] == name {
			uid, err1 := strconv.Atoi(f[2])
			gid, err2 := strconv.Atoi(f[3])
			if err1 == nil && err2 == nil {
				return uid, gid, nil
			}
		}
	}
	return 0, 0, fmt.Errorf("no user %s in /etc/passwd", name)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
