// Command fakejob behaves like a small torchrun job for ncclwiz's tests in
// containers (built static, CGO_ENABLED=0, and imported as an image):
//
//	fakejob launcher PLAN   start one rank per comma-separated word of PLAN
//	                        ("spin" or "pipe") with torchrun's variables
//
// Each rank writes a flight-recorder dump in the JSON form PyTorch's
// dump_json writes to /tmp/nccl_trace_rank_<rank>: the "pipe" rank, which
// then blocks reading a pipe nobody writes, is one collective behind.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) >= 3 && os.Args[1] == "launcher" {
		launcher(strings.Split(os.Args[2], ","))
		return
	}
	if os.Getenv("FAKEJOB_DO") != "" {
		rank()
		return
	}
	fmt.Fprintln(os.Stderr, "usage: fakejob launcher spin,pipe,...")
	os.Exit(2)
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
		c.Env = append(os.Environ(), "FAKEJOB_DO="+what, "RANK="+strconv.Itoa(i), "LOCAL_RANK="+strconv.Itoa(i),
			"WORLD_SIZE="+strconv.Itoa(len(plan)), "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500",
			"TORCHELASTIC_RUN_ID=fakejob", "GROUP_RANK=0")
		if what == "pipe" {
			if r, _, err := os.Pipe(); err == nil {
				c.Stdin = r
			}
		}
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		cmds = append(cmds, c)
	}
	for _, c := range cmds {
		_ = c.Wait()
	}
}

func rank() {
	r, _ := strconv.Atoi(os.Getenv("RANK"))
	world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	what := os.Getenv("FAKEJOB_DO")
	last := 5
	if what == "pipe" {
		last = 4
	}
	writeDump(r, world, last)
	switch what {
	case "spin":
		for x := 0; ; x++ {
			if x%50_000_000 == 0 {
				fmt.Println("step", x)
			}
		}
	case "pipe":
		b := make([]byte, 1)
		_, _ = os.Stdin.Read(b)
	}
	time.Sleep(time.Hour)
}

func writeDump(rank, world, last int) {
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
	_ = os.WriteFile(fmt.Sprintf("/tmp/nccl_trace_rank_%d", rank), b, 0o644)
}
