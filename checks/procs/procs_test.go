package procs

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
)

func TestParseStat(t *testing.T) {
	p, err := parseStat([]byte("4242 (pt_main_thread (x)) S 1 4242 4242 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 5000 0 0\n"))
	if err != nil || p.PID != 4242 || p.Comm != "pt_main_thread (x)" || p.State != "S" || p.PPID != 1 || p.StartTicks != 5000 {
		t.Errorf("parseStat = %+v, %v", p, err)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

func proc(pid, ppid int, state, comm, cmd, env string) map[string]any {
	dir := "/proc/" + itoa(pid)
	return map[string]any{
		dir + "/stat":    itoa(pid) + " (" + comm + ") " + state + " " + itoa(ppid) + " 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1000 0 0\n",
		dir + "/status":  "Name:\t" + comm + "\nUid:\t1000\t1000\t1000\t1000\n",
		dir + "/cmdline": strings.ReplaceAll(cmd, " ", "\x00") + "\x00",
		dir + "/environ": strings.ReplaceAll(env, " ", "\x00"),
	}
}

func merge(ms ...map[string]any) map[string]any {
	out := map[string]any{"/proc/uptime": "5000.00 1.00\n"}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestFindStaleRanks(t *testing.T) {
	files := merge(
		proc(1, 0, "S", "systemd", "/sbin/init", ""),
		proc(2, 1, "S", "torchrun", "/venv/bin/python /venv/bin/torchrun --nproc_per_node=2 train.py", ""),
		proc(3, 2, "S", "python", "/venv/bin/python -u train.py", "RANK=0 LOCAL_RANK=0"), // healthy rank
		proc(4, 1, "S", "python", "/venv/bin/python -u train.py", "RANK=1 LOCAL_RANK=1"), // launcher gone
		proc(5, 2, "Z", "python", "", "RANK=1 LOCAL_RANK=1"),                             // zombie
		proc(6, 7, "S", "python", "python train.py", "RANK=0"),                           // started by hand from bash
		proc(7, 1, "S", "bash", "-bash", ""),
		proc(8, 1, "S", "python", "python notebook.py", "HOME=/root"), // not a rank
	)
	h := ft.Tree(t, files, host.FixtureSpec{UID: 1000})
	rs, err := FindStaleRanks(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for _, r := range rs {
		got[r.PID] = r.Reason
	}
	if len(got) != 2 || !strings.Contains(got[4], "launcher is gone") || !strings.Contains(got[5], "zombie") {
		t.Errorf("stale ranks = %v", got)
	}
	fs, _ := run(context.Background(), h)
	if fs[0].Severity != checks.Warn || len(fs[0].Fixes) != 1 || fs[0].Fixes[0] != "proc.stale" {
		t.Errorf("finding = %+v", fs[0])
	}
}

func TestIsLauncher(t *testing.T) {
	for cmd, want := range map[string]bool{
		"/venv/bin/python /venv/bin/torchrun --nproc_per_node=8 train.py": true,
		"python -m torch.distributed.run train.py":                        true,
		"/usr/bin/python3 /usr/local/bin/accelerate launch t.py":          true,
		"deepspeed --num_gpus 8 t.py":                                     true,
		"python train.py":                                                 false,
	} {
		if got := IsLauncher(Proc{Cmdline: strings.Fields(cmd)}); got != want {
			t.Errorf("IsLauncher(%q) = %v", cmd, got)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
