package validate

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

func shell(t *testing.T, script string, timeout time.Duration) (procResult, []string, string) {
	t.Helper()
	marker := newRunID()
	var mu sync.Mutex
	var lines []string
	res, err := runProcess(context.Background(), procSpec{
		Path: "/bin/sh", Args: []string{"-c", script}, Env: []string{"PATH=/usr/bin:/bin", MarkerVar + "=" + marker},
		Dir: t.TempDir(), Marker: marker, Timeout: timeout, Grace: 200 * time.Millisecond,
		OnLine: func(s string) { mu.Lock(); lines = append(lines, s); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	return res, lines, marker
}

func TestRunProcessExitCodes(t *testing.T) {
	res, lines, _ := shell(t, "echo out; echo err >&2; exit 3", time.Minute)
	if res.ExitCode != 3 || res.TimedOut || strings.Join(lines, ",") != "out,err" {
		t.Errorf("%+v %q", res, lines)
	}
	res, _, _ = shell(t, "kill -TERM $$", time.Minute)
	if res.ExitCode != -15 || res.Signal != "SIGTERM" {
		t.Errorf("%+v", res)
	}
}

// A child left in the group after the leader exits normally is found and
// ended; the pipe it holds does not block the runner.
func TestRunProcessGroupSurvivor(t *testing.T) {
	// Wait until the child has exec'd: before that its comm is still "sh".
	res, _, marker := shell(t, `sleep 1000 & while [ "$(cat /proc/$!/comm)" != sleep ]; do :; done; echo started`, time.Minute)
	if res.ExitCode != 0 || len(res.Survivors) != 1 || res.Survivors[0].Comm != "sleep" || res.Survivors[0].Why != "process group" {
		t.Fatalf("%+v", res)
	}
	assertNoSurvivors(t, marker)
}

// On timeout a process that ignores SIGTERM is killed, and one that left
// the group (setsid) is found by the marker.
func TestRunProcessTimeoutEscaped(t *testing.T) {
	res, lines, marker := shell(t, "trap '' TERM; setsid sleep 1002 & sleep 1001 & echo ready; while :; do sleep 1; done", 500*time.Millisecond)
	if !res.TimedOut || len(lines) == 0 || lines[0] != "ready" {
		t.Fatalf("%+v %q", res, lines)
	}
	var escaped bool
	for _, p := range res.Survivors {
		escaped = escaped || p.Why == "environment marker"
	}
	if !escaped || len(res.Leftover) != 0 {
		t.Errorf("survivors %+v leftover %+v", res.Survivors, res.Leftover)
	}
	assertNoSurvivors(t, marker)
}

func TestRunProcessCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	marker := newRunID()
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	res, err := runProcess(ctx, procSpec{Path: "/bin/sh", Args: []string{"-c", "sleep 1000"}, Env: []string{"PATH=/usr/bin:/bin", MarkerVar + "=" + marker},
		Marker: marker, Timeout: time.Minute, Grace: time.Second})
	if err != nil || !res.Canceled || res.TimedOut {
		t.Fatalf("%v %+v", err, res)
	}
	assertNoSurvivors(t, marker)
}

func TestRunProcessStartError(t *testing.T) {
	if _, err := runProcess(context.Background(), procSpec{Path: "/nonexistent/launcher", Timeout: time.Second}); err == nil {
		t.Error("want an error")
	}
}
