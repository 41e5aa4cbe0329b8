// Command rankhelper plays the processes of a distributed job for the real
// layout tests of checks/procs (built there with CGO_ENABLED=0, so it also
// runs in a docker-imported image with nothing else in it):
//
//	rankhelper launcher N [busy|idle] [exit]  start N ranks (RANK, LOCAL_RANK,
//	                                          WORLD_SIZE, LOCAL_WORLD_SIZE,
//	                                          TORCHELASTIC_RUN_ID…) and wait,
//	                                          or exit at once ("exit": a dead launcher)
//	rankhelper rank [busy|idle]               a rank: burn a little CPU, or sleep
//	rankhelper init -- CMD ARGS…              a tini-like init: run CMD, reap every orphan
package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: rankhelper launcher N [busy|idle] [exit] | rank [busy|idle] | init -- CMD…")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "launcher":
		launcher(os.Args[2:])
	case "rank":
		rank(len(os.Args) > 2 && os.Args[2] == "busy")
	case "init":
		initLike(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}

func launcher(args []string) {
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "launcher: bad rank count")
		os.Exit(2)
	}
	mode, exit := "idle", false
	for _, a := range args[1:] {
		switch a {
		case "busy", "idle":
			mode = a
		case "exit":
			exit = true
		}
	}
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	var cmds []*exec.Cmd
	for i := 0; i < n; i++ {
		c := exec.Command(self, "rank", mode)
		// Named python3, as a rank is: proc.stale wants positive evidence
		// that a process is a rank (the real-job tests run real torch).
		c.Args[0] = "python3"
		c.Env = append(os.Environ(), "RANK="+strconv.Itoa(i), "LOCAL_RANK="+strconv.Itoa(i),
			"WORLD_SIZE="+strconv.Itoa(n), "LOCAL_WORLD_SIZE="+strconv.Itoa(n), "GROUP_RANK=0",
			"TORCHELASTIC_RUN_ID=ncclwiz-test", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29555")
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "launcher:", err)
			os.Exit(1)
		}
		cmds = append(cmds, c)
	}
	if exit {
		os.Exit(0) // the ranks are orphaned
	}
	for _, c := range cmds {
		_ = c.Wait()
	}
}

func rank(busy bool) {
	for {
		if busy {
			// About 60% of a CPU, as a rank that computes: progress any
			// sample of a second sees, however loaded the machine.
			end := time.Now().Add(60 * time.Millisecond)
			x := 0
			for time.Now().Before(end) {
				x++
			}
			_ = x
			time.Sleep(40 * time.Millisecond)
		} else {
			time.Sleep(time.Hour)
		}
	}
}

// initLike runs the command after "--" and reaps every child, like tini.
func initLike(args []string) {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "init: no command")
		os.Exit(2)
	}
	c := exec.Command(args[0], args[1:]...)
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	if err := c.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "init:", err)
		os.Exit(1)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
