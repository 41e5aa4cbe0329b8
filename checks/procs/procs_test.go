package procs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// The fixture clock: boot at btime, "now" 10000 s later.
const (
	btime = 1_700_000_000
	upSec = 10000
)

var fixtureNow = time.Unix(btime+upSec, 0).UTC().Format(time.RFC3339)

// fp describes one fixture process.
type fp struct {
	pid, ppid int
	comm      string
	state     string
	age       time.Duration
	cmd, env  string // space-separated
	nspid     []int  // default: [pid]
	threads   int    // default 1
	pgid      int    // default pid
	pidns     string // the ns/pid link, if any
}

func (p fp) files() map[string]any {
	dir := fmt.Sprintf("/proc/%d", p.pid)
	if p.state == "" {
		p.state = "S"
	}
	if p.threads == 0 {
		p.threads = 1
	}
	if p.pgid == 0 {
		p.pgid = p.pid
	}
	if p.nspid == nil {
		p.nspid = []int{p.pid}
	}
	start := uint64((upSec*time.Second - p.age) / (time.Second / proctab.UserHZ))
	stat := func(id int, state string) string {
		return fmt.Sprintf("%d (%s) %s %d %d %d 0 -1 4194304 10 0 0 0 500 20 0 0 20 0 %d 0 %d 1000 100 0\n",
			id, p.comm, state, p.ppid, p.pgid, p.pgid, p.threads, start)
	}
	ns := make([]string, len(p.nspid))
	for i, n := range p.nspid {
		ns[i] = fmt.Sprint(n)
	}
	m := map[string]any{
		dir + "/stat":    stat(p.pid, p.state),
		dir + "/status":  fmt.Sprintf("Name:\t%s\nPid:\t%d\nPPid:\t%d\nUid:\t1000\t1000\t1000\t1000\nThreads:\t%d\nNSpid:\t%s\n", p.comm, p.pid, p.ppid, p.threads, strings.Join(ns, "\t")),
		dir + "/cmdline": strings.ReplaceAll(p.cmd, " ", "\x00") + "\x00",
		dir + "/environ": strings.ReplaceAll(p.env, " ", "\x00") + "\x00",
	}
	if p.pidns != "" {
		m[dir+"/ns/pid"] = ft.Symlink(p.pidns)
	}
	for i := 0; i < p.threads; i++ {
		st := p.state
		if i > 0 {
			st = "S"
		}
		m[fmt.Sprintf("%s/task/%d/stat", dir, p.pid+i)] = stat(p.pid+i, st)
	}
	return m
}

func tree(t *testing.T, ps ...fp) *host.Host { return treeWith(t, nil, ps...) }

// treeWith adds extra files (e.g. /proc/self) to the processes.
func treeWith(t *testing.T, extra map[string]any, ps ...fp) *host.Host {
	files := map[string]any{
		"/proc/uptime": fmt.Sprintf("%d.00 1.00\n", upSec),
		"/proc/stat":   fmt.Sprintf("cpu  1 2 3 4\nbtime %d\nprocesses 10\n", btime),
	}
	for _, p := range ps {
		for k, v := range p.files() {
			files[k] = v
		}
	}
	for k, v := range extra {
		files[k] = v
	}
	return ft.Tree(t, files, host.FixtureSpec{UID: 1000, Now: fixtureNow})
}

const (
	old     = 10 * time.Minute
	elastic = "TORCHELASTIC_RUN_ID=none MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2"
	// otherRun is another job's rendezvous (a live rank of one run keeps
	// the orphans of the same run live).
	otherRun = "TORCHELASTIC_RUN_ID=none MASTER_ADDR=127.0.0.1 MASTER_PORT=29600 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2"
)

func rank(pid, ppid, r int, age time.Duration, env string) fp {
	return fp{pid: pid, ppid: ppid, comm: "python", age: age, cmd: "python -u train.py",
		env: fmt.Sprintf("RANK=%d LOCAL_RANK=%d %s", r, r, env)}
}

// idle says no process used CPU; busy(pids) says those did.
func sampler(busy ...int) Sampler {
	return func(pids []int) (map[int]proctab.Progress, error) {
		out := map[int]proctab.Progress{}
		for _, pid := range pids {
			pr := proctab.Progress{PID: pid, Interval: time.Second, Threads: 1, Live: 1}
			for _, b := range busy {
				if b == pid {
					pr.CPUTicks, pr.RanThreads = 12, 1
				}
			}
			out[pid] = pr
		}
		return out, nil
	}
}

// TestJudge reproduces the layouts of issue 13 item 3 as fixture trees: a
// launcher as PID 1 of a PID namespace, a rank as PID 1, a process entered
// with nsenter, a young orphan, and the real leftovers.
func TestJudge(t *testing.T) {
	tini := fp{pid: 400, ppid: 0, comm: "tini", cmd: "/sbin/tini -- sleep infinity", age: time.Hour, nspid: []int{400, 1}}
	systemd := fp{pid: 1, comm: "systemd", cmd: "/sbin/init", age: 3 * time.Hour}
	// ncclwiz itself in the initial PID namespace: PID 1 of this /proc is
	// the machine's init even when its own namespace link is unreadable.
	initialNS := map[string]any{"/proc/self/status": "Name:\tncclwiz\nPid:\t77\nNSpid:\t77\n", "/proc/self/ns/pid": ft.Symlink(proctab.InitPIDNS)}
	for _, tc := range []struct {
		name   string
		extra  map[string]any
		procs  []fp
		busy   []int
		dstate []int          // in uninterruptible sleep during the sample
		want   map[int]string // pid -> verdict
		reason map[int]string // pid -> part of the evidence
	}{
		{name: "launcher is PID 1 of the namespace (docker run … launcher)",
			procs: []fp{{pid: 500, comm: "launcher", cmd: "/launcher 2", age: old, nspid: []int{500, 1}},
				rank(501, 500, 0, old, elastic), rank(502, 500, 1, old, elastic)},
			want:   map[int]string{501: Live, 502: Live},
			reason: map[int]string{501: "launcher (pid 500, PID 1 of its namespace) is running and may be its launcher"}},
		{name: "torchrun alive",
			procs: []fp{systemd, {pid: 10, ppid: 1, comm: "torchrun", cmd: "/venv/bin/python /venv/bin/torchrun --nproc_per_node=2 t.py", age: old},
				rank(11, 10, 0, old, elastic), rank(12, 10, 1, old, elastic)},
			want:   map[int]string{11: Live, 12: Live},
			reason: map[int]string{11: "its launcher torchrun (pid 10) is running"}},
		{name: "python -m torch.distributed.run as PID 1",
			procs: []fp{{pid: 1, comm: "python", cmd: "python -m torch.distributed.run --nproc_per_node=1 t.py", age: old},
				rank(7, 1, 0, old, elastic)},
			want: map[int]string{7: Live}, reason: map[int]string{7: "its launcher python (pid 1) is running"}},
		{name: "launcher died under tini: idle ranks are leftovers",
			procs: []fp{tini, rank(401, 400, 0, old, elastic), rank(402, 400, 1, old, elastic)},
			want:  map[int]string{401: Stale, 402: Stale},
			reason: map[int]string{401: "launcher gone: torchrun started it (TORCHELASTIC_RUN_ID is set) but its parent is now tini (pid 400, PID 1 of its namespace)",
				402: "no CPU used by any of its 1 threads over 1s"}},
		{name: "launcher died, one rank still works",
			procs: []fp{tini, rank(401, 400, 0, old, elastic), rank(402, 400, 1, old, elastic)},
			busy:  []int{402},
			want:  map[int]string{401: Stale, 402: Busy},
			reason: map[int]string{402: "but it is working: used 120ms of CPU",
				401: "1 of the job's 1 other local ranks still run (pid 402)"}},
		{name: "launcher died, one rank in uninterruptible sleep: not offered, and a signal would not help",
			procs:  []fp{tini, rank(401, 400, 0, old, elastic), rank(402, 400, 1, old, elastic)},
			dstate: []int{402},
			want:   map[int]string{401: Stale, 402: Busy},
			reason: map[int]string{402: "but it is in uninterruptible sleep (D, 1 thread during the sample): the kernel waits on its behalf — for storage, a network filesystem, a driver or the GPU; it acts on no signal until that wait returns (Ctrl-C, or a SIGTERM the program handles, waits)"}},
		{name: "srun step: the ranks' slurmstepd runs",
			procs: []fp{systemd, {pid: 60, ppid: 1, comm: "slurmd", cmd: "/usr/sbin/slurmd -D", age: old},
				{pid: 61, ppid: 60, comm: "slurmstepd", cmd: "slurmstepd: [7.0]", age: old},
				rank(62, 61, 0, old, "SLURM_PROCID=0 SLURM_JOB_ID=7 SLURM_STEP_ID=0 MASTER_ADDR=n1 MASTER_PORT=29500")},
			want: map[int]string{62: Live}, reason: map[int]string{62: "its launcher slurmstepd (pid 61) is running"}},
		{name: "launcher died on a bare host: re-parented to systemd, peer gone",
			procs:  []fp{systemd, rank(900, 1, 1, old, elastic)},
			want:   map[int]string{900: Stale},
			reason: map[int]string{900: "none of the job's 1 other local ranks runs"}},
		{name: "re-parented to the machine's init, whatever its name (a microVM agent)",
			procs:  []fp{{pid: 1, comm: "process_api", cmd: "/process_api --firecracker-init", age: time.Hour, pidns: proctab.InitPIDNS}, rank(900, 1, 1, old, elastic)},
			want:   map[int]string{900: Stale},
			reason: map[int]string{900: "its parent is now process_api (pid 1, the machine's init)"}},
		{name: "re-parented to the machine's init, its namespace link unreadable (seen from the initial namespace)",
			extra:  initialNS,
			procs:  []fp{{pid: 1, comm: "process_api", cmd: "/process_api", age: time.Hour}, rank(900, 1, 1, old, elastic)},
			want:   map[int]string{900: Stale},
			reason: map[int]string{900: "(pid 1, the machine's init)"}},
		{name: "an unknown PID 1, nothing says which namespace: may be the launcher",
			procs:  []fp{{pid: 1, comm: "process_api", cmd: "/process_api", age: time.Hour}, rank(900, 1, 1, old, elastic)},
			want:   map[int]string{900: Live},
			reason: map[int]string{900: "may be its launcher"}},
		{name: "leader exited (pthread_exit) while its threads run: alive, judged like any rank",
			procs: []fp{tini, func() fp { r := rank(401, 400, 0, old, elastic); r.state, r.threads = "Z", 3; return r }()},
			want:  map[int]string{401: Stale}},
		{name: "ncclwiz run by docker exec inherits the container's RANK: never judged",
			extra: map[string]any{"/proc/self/status": "Name:\tncclwiz\nPid:\t450\nNSpid:\t450\n"},
			procs: []fp{tini, rank(450, 0, 0, old, elastic)},
			want:  map[int]string{}},
		{name: "an unknown PID 1 of another namespace may be the launcher",
			procs:  []fp{{pid: 1, comm: "process_api", cmd: "/process_api", age: time.Hour, pidns: "pid:[4026532999]"}, rank(900, 1, 1, old, elastic)},
			want:   map[int]string{900: Live},
			reason: map[int]string{900: "may be its launcher"}},
		{name: "process group leader of the dead launcher is named",
			procs:  []fp{systemd, func() fp { r := rank(900, 1, 1, old, elastic); r.pgid = 880; return r }()},
			want:   map[int]string{900: Stale},
			reason: map[int]string{900: "its process group leader pid 880 is gone"}},
		{name: "rank is PID 1 itself (Kubernetes pod)",
			procs: []fp{{pid: 300, ppid: 299, comm: "containerd-shim", cmd: "containerd-shim-runc-v2", age: old},
				func() fp { r := rank(301, 300, 0, old, elastic); r.nspid = []int{301, 1}; return r }()},
			want:   map[int]string{301: Live},
			reason: map[int]string{301: "PID 1 of its own PID namespace"}},
		{name: "pod sharing its process namespace: the rank's container process was started from outside, an orphan is adopted by pause",
			procs: []fp{{pid: 1, comm: "pause", cmd: "/pause", age: time.Hour}, rank(7, 0, 0, old, elastic), rank(9, 1, 1, old, elastic)},
			want:  map[int]string{7: Live, 9: Stale}, reason: map[int]string{7: "PPID 0", 9: "its parent is now pause (pid 1)"}},
		{name: "rank as PID 1 seen from inside its namespace",
			procs: []fp{rank(1, 0, 0, old, elastic)},
			want:  map[int]string{1: Live}, reason: map[int]string{1: "PID 1 of its own PID namespace"}},
		{name: "entered with nsenter or docker exec (PPID 0)",
			procs: []fp{tini, rank(450, 0, 0, old, elastic)},
			want:  map[int]string{450: Live}, reason: map[int]string{450: "PPID 0"}},
		{name: "one second old orphan",
			procs: []fp{tini, rank(401, 400, 0, time.Second, elastic)},
			want:  map[int]string{401: Young}, reason: map[int]string{401: "only 1s old"}},
		{name: "started directly by tini (operator-set RANK, no launcher)",
			procs: []fp{tini, rank(401, 400, 0, old, "WORLD_SIZE=16 MASTER_ADDR=job-master-0")},
			want:  map[int]string{401: Unknown}, reason: map[int]string{401: "nothing in its environment says a launcher started it"}},
		{name: "started by hand from a shell",
			procs: []fp{systemd, {pid: 20, ppid: 1, comm: "bash", cmd: "-bash", age: old}, rank(21, 20, 0, old, elastic)},
			want:  map[int]string{21: Live}, reason: map[int]string{21: "bash (pid 20) is running and may be its launcher"}},
		{name: "zombie rank",
			procs: []fp{systemd, {pid: 30, ppid: 1, comm: "torchrun", cmd: "torchrun t.py", age: old},
				func() fp { r := rank(31, 30, 0, old, elastic); r.state = "Z"; return r }()},
			want: map[int]string{31: Zombie}, reason: map[int]string{31: "only its parent (pid 30) can reap it"}},
		{name: "data-loader worker of a live rank is part of the rank",
			procs: []fp{systemd, {pid: 40, ppid: 1, comm: "torchrun", cmd: "torchrun t.py", age: old},
				rank(41, 40, 0, old, elastic), rank(42, 41, 0, old, elastic)},
			want: map[int]string{41: Live}},
		{name: "not a rank",
			procs: []fp{systemd, {pid: 50, ppid: 1, comm: "python", cmd: "python notebook.py", env: "HOME=/root", age: old}},
			want:  map[int]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := treeWith(t, tc.extra, tc.procs...)
			tab, err := proctab.Read(context.Background(), h, proctab.Options{EnvKeys: EnvKeys})
			if err != nil {
				t.Fatal(err)
			}
			sample := sampler(tc.busy...)
			if len(tc.dstate) > 0 {
				sample = func(pids []int) (map[int]proctab.Progress, error) {
					out, _ := sampler(tc.busy...)(pids)
					for _, pid := range tc.dstate {
						if pr, ok := out[pid]; ok {
							pr.Blocked = []int{pid}
							out[pid] = pr
						}
					}
					return out, nil
				}
			}
			as, err := Judge(tab, Options{}, sample)
			if err != nil {
				t.Fatal(err)
			}
			got := map[int]string{}
			why := map[int]string{}
			for _, a := range as {
				got[a.PID] = a.Verdict
				why[a.PID] = a.Reason()
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("verdicts = %v, want %v\n%v", got, tc.want, why)
			}
			for pid, part := range tc.reason {
				if !strings.Contains(why[pid], part) {
					t.Errorf("pid %d: evidence %q lacks %q", pid, why[pid], part)
				}
			}
		})
	}
}

// TestJudgeSamplesOnlySuspects: the CPU sample (a second of waiting on a
// real machine) is taken only for ranks whose launcher is gone and that
// are old enough.
func TestJudgeSamplesOnlySuspects(t *testing.T) {
	h := tree(t, fp{pid: 1, comm: "systemd", age: time.Hour},
		fp{pid: 10, ppid: 1, comm: "torchrun", cmd: "torchrun t.py", age: old},
		rank(11, 10, 0, old, elastic), rank(12, 1, 1, time.Second, otherRun), rank(13, 1, 1, old, otherRun))
	tab, err := proctab.Read(context.Background(), h, proctab.Options{EnvKeys: EnvKeys})
	if err != nil {
		t.Fatal(err)
	}
	var asked []int
	_, err = Judge(tab, Options{}, func(pids []int) (map[int]proctab.Progress, error) {
		asked = append(asked, pids...)
		return sampler()(pids)
	})
	if err != nil || fmt.Sprint(asked) != "[13]" {
		t.Errorf("sampled %v (err %v), want only [13]", asked, err)
	}
}

// TestCheckFinding runs proc.ranks on a fixture with its real sampler: the
// fixture's CPU times do not move, so the orphan under tini is a leftover,
// the finding offers proc.stale and carries every rank's evidence.
func TestCheckFinding(t *testing.T) {
	h := tree(t, fp{pid: 400, comm: "tini", nspid: []int{400, 1}, age: time.Hour},
		rank(401, 400, 3, old, elastic), fp{pid: 500, comm: "launcher", nspid: []int{500, 1}, age: old}, rank(501, 500, 0, old, elastic))
	fs, err := run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Severity != checks.Warn || len(fs[0].Fixes) != 1 || fs[0].Fixes[0] != "proc.stale" {
		t.Fatalf("findings = %+v", fs)
	}
	list := fs[0].Evidence["stale_ranks"].([]map[string]any)
	if len(list) != 1 || list[0]["pid"] != 401 || list[0]["rank"] != "3" || list[0]["cpu_ms_in_sample"] != int64(0) {
		t.Errorf("stale_ranks = %v", list)
	}
	if all := fs[0].Evidence["ranks"].([]map[string]any); len(all) != 2 || all[1]["verdict"] != Live {
		t.Errorf("ranks = %v", all)
	}
}

func TestIsLauncher(t *testing.T) {
	for cmd, want := range map[string]bool{
		"/venv/bin/python /venv/bin/torchrun --nproc_per_node=8 train.py": true,
		"python -m torch.distributed.run train.py":                        true,
		"/usr/bin/python3 /usr/local/bin/accelerate launch t.py":          true,
		"deepspeed --num_gpus 8 t.py":                                     true,
		"mpirun -np 8 python t.py":                                        true,
		"python train.py":                                                 false,
	} {
		if got := IsLauncher(proctab.Process{Cmdline: strings.Fields(cmd)}); got != want {
			t.Errorf("IsLauncher(%q) = %v", cmd, got)
		}
	}
}

// A leftover rank whose command line is long and Chinese (a script in a
// directory named in Chinese, Chinese run names): the evidence shortens it
// between characters, by terminal cells, never inside a UTF-8 sequence.
func TestLongCJKCommandLineIsNotCutMidRune(t *testing.T) {
	args := "python -u /数据/实验/训练脚本.py"
	for i := 0; i < 20; i++ {
		args += fmt.Sprintf(" --名称=第%d次实验", i)
	}
	r := rank(401, 400, 3, old, elastic)
	r.cmd = args
	h := tree(t, fp{pid: 400, comm: "tini", nspid: []int{400, 1}, age: time.Hour}, r)
	fs, err := run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 {
		t.Fatalf("findings = %+v", fs)
	}
	list := fs[0].Evidence["stale_ranks"].([]map[string]any)
	cmd := list[0]["command"].(string)
	if !utf8.ValidString(cmd) || strings.ContainsRune(cmd, utf8.RuneError) {
		t.Fatalf("command cut inside a rune: %q", cmd)
	}
	body, cut := strings.CutSuffix(cmd, "...")
	if !cut || !strings.HasPrefix(args, body) || ansi.StringWidth(cmd) > 160 || ansi.StringWidth(cmd) < 155 {
		t.Fatalf("command %q (%d cells) is not the start of %q within 160 cells", cmd, ansi.StringWidth(cmd), args)
	}
}

func TestKernelWait(t *testing.T) {
	for wchan, want := range map[string]string{
		"kernel_clone":             "a child it started with vfork (posix_spawn, a subprocess) to exec or exit (in kernel_clone)",
		"nfs_wait_bit_killable":    "an NFS server (in nfs_wait_bit_killable)",
		"rpc_wait_bit_killable":    "an NFS server",
		"request_wait_answer":      "a FUSE filesystem's daemon",
		"os_acquire_spinlock":      "the NVIDIA driver (the GPU)",
		"nvme_poll":                "disk or filesystem I/O",
		"folio_wait_bit_common":    "disk or filesystem I/O",
		"io_schedule":              "disk or filesystem I/O",
		"rwsem_down_read_slowpath": "a kernel lock another task holds",
		"something_new":            "the kernel waits on its behalf (in something_new) — for storage, a network filesystem, a driver or the GPU",
		"":                         "the kernel waits on its behalf — for storage",
	} {
		if got := KernelWait(wchan); !strings.Contains(got, want) {
			t.Errorf("KernelWait(%q) = %q, want %q in it", wchan, got, want)
		}
	}
}
