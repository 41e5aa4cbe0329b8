// Command fakejob behaves like a small torchrun job for ncclwiz's hang
// tests, on the host and in containers (built static, CGO_ENABLED=0, and
// imported as an image). It is the one fake job of those tests:
//
//	fakejob launcher PLAN   start one rank per comma-separated word of PLAN
//	                        with torchrun's variables; the same with the plan
//	                        in FAKEJOB_PLAN and any other argv (started as
//	                        "torchrun --nproc-per-node=3 train.py"; under
//	                        another argv[0] it re-executes itself so)
//	FAKEJOB_DO=WHAT         be one rank: "spin" (prints a step every 200ms),
//	                        "wait" (sleeps on its main thread, as a rank
//	                        waiting in a collective does, after its dump),
//	                        "pipe" (blocks reading a pipe nobody writes),
//	                        "stop" (stops itself), "loader" (starts a sleeping
//	                        data-loader child, which inherits RANK), "sleep"
//
// The launcher prints "ready" once its ranks run. FAKEJOB_LOGDIR gives each
// rank a log file there; FAKEJOB_DUMPS, a path prefix, makes each rank write
// a flight-recorder dump (PREFIX<rank>) in the JSON form PyTorch's dump_json
// writes: the "pipe" rank is one collective behind.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func init() { runtime.LockOSThread() }

func main() {
	switch {
	case os.Getenv("FAKEJOB_DO") != "":
		rank()
	case len(os.Args) >= 3 && os.Args[1] == "launcher":
		launcher(strings.Split(os.Args[2], ","))
	case os.Getenv("FAKEJOB_PLAN") != "":
		if os.Args[0] != "torchrun" { // started by unshare: look like torchrun
			self, err := os.Executable()
			if err == nil {
				err = syscall.Exec(self, []string{"torchrun", "--nproc-per-node=3", "train.py"}, os.Environ())
			}
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		launcher(strings.Split(os.Getenv("FAKEJOB_PLAN"), ","))
	default:
		fmt.Fprintln(os.Stderr, "usage: fakejob launcher spin,pipe,...")
		os.Exit(2)
	}
}

func launcher(plan []string) {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var cmds []*exec.Cmd
	for i, what := range plan {
		c := exec.Command(self)
		c.Args = []string{"python3", "train.py", "--rank-behaviour", what}
		c.Env = append(os.Environ(), "FAKEJOB_DO="+what, "RANK="+strconv.Itoa(i), "LOCAL_RANK="+strconv.Itoa(i),
			"WORLD_SIZE="+strconv.Itoa(len(plan)), "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(20000+os.Getpid()%10000),
			"TORCHELASTIC_RUN_ID=none", "GROUP_RANK=0")
		if dir := os.Getenv("FAKEJOB_LOGDIR"); dir != "" {
			if f, err := os.Create(fmt.Sprintf("%s/rank%d.log", dir, i)); err == nil {
				c.Stdout, c.Stderr = f, f
			}
		}
		if what == "pipe" {
			if r, _, err := os.Pipe(); err == nil { // the write end stays open and silent
				c.Stdin = r
			}
		}
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		cmds = append(cmds, c)
	}
	fmt.Println("ready")
	for _, c := range cmds {
		_ = c.Wait()
	}
}

func rank() {
	r, _ := strconv.Atoi(os.Getenv("RANK"))
	world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	what := os.Getenv("FAKEJOB_DO")
	if prefix := os.Getenv("FAKEJOB_DUMPS"); prefix != "" && what != "sleep" {
		last := 5
		if what == "pipe" {
			last = 4
		}
		writeDump(prefix, r, world, last)
	}
	switch what {
	case "spin":
		x, last := 0, time.Now()
		for {
			x++
			if time.Since(last) > 200*time.Millisecond {
				fmt.Println("step", x)
				last = time.Now()
			}
		}
	case "pipe":
		// A plain read(2) on the main thread (locked in init), so that the
		// process's own wchan is pipe_read, as a Python rank's is.
		b := make([]byte, 1)
		_, _ = syscall.Read(0, b)
	case "loader":
		self, _ := os.Executable()
		c := exec.Command(self)
		c.Env = append(os.Environ(), "FAKEJOB_DO=sleep")
		_ = c.Start()
		fmt.Println("ready")
	case "stop":
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	}
	time.Sleep(time.Hour)
}

func writeDump(prefix string, rank, world, last int) {
	ranks := make([]string, world)
	for i := range ranks {
		ranks[i] = strconv.Itoa(i)
	}
	var entries []map[string]any
	for seq := 1; seq <= last; seq++ {
		state := "completed"
		if seq == last {
			state = "started"
		}
		entries = append(entries, map[string]any{
			"record_id": seq - 1, "pg_id": 0, "process_group": []string{"0", "default_pg"},
			"collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq, "profiling_name": "nccl:all_reduce",
			"time_created_ns": 1_700_000_000_000_000_000 + seq, "input_sizes": [][]int{{1024}}, "input_dtypes": []string{"Float"},
			"output_sizes": [][]int{{1024}}, "output_dtypes": []string{"Float"}, "state": state,
			"time_discovered_started_ns": 1, "time_discovered_completed_ns": 0, "retired": false, "timeout_ms": 600000, "is_p2p": false,
		})
	}
	d := map[string]any{
		"version":   "2.7",
		"pg_config": map[string]any{"0": map[string]string{"name": "0", "desc": "default_pg", "ranks": "[" + strings.Join(ranks, ", ") + "]"}},
		"pg_status": map[string]any{"0": map[string]string{"last_enqueued_collective": strconv.Itoa(last), "last_started_collective": strconv.Itoa(last), "last_completed_collective": strconv.Itoa(last - 1)}},
		"entries":   entries,
	}
	b, _ := json.Marshal(d)
	_ = os.WriteFile(prefix+strconv.Itoa(rank), b, 0o644)
}
