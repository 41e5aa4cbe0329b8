package checks

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
)

func TestRunIsolatesFailures(t *testing.T) {
	h := &host.Host{Kind: "fixture", EUID: 1000}
	block := make(chan struct{})
	defer close(block)
	cs := []Check{
		{ID: "t.ok", Title: "fine", Run: func(context.Context, *host.Host) ([]Finding, error) {
			return []Finding{{Severity: OK, Title: "all good"}}, nil
		}},
		{ID: "t.empty", Title: "empty", Run: func(context.Context, *host.Host) ([]Finding, error) { return nil, nil }},
		{ID: "t.err", Title: "broken", Run: func(context.Context, *host.Host) ([]Finding, error) {
			return nil, errors.New("cannot read /proc")
		}},
		{ID: "t.panic", Title: "crashy", Run: func(context.Context, *host.Host) ([]Finding, error) {
			var m map[string]int
			//lint:ignore SA5000 the panic is what this check is for
			m["x"] = 1
			return nil, nil
		}},
		{ID: "t.slow", Title: "slow", Timeout: 50 * time.Millisecond, Run: func(ctx context.Context, _ *host.Host) ([]Finding, error) {
			<-block // ignores ctx on purpose: the engine must not wait for it
			return nil, nil
		}},
		{ID: "t.root", Title: "rooty", Needs: []Need{NeedRoot}, Run: func(context.Context, *host.Host) ([]Finding, error) {
			t.Error("a NeedRoot check ran without root")
			return nil, nil
		}},
	}
	var streamed []string
	rs := Run(context.Background(), h, cs, Options{Concurrency: 2, OnResult: func(r Result) { streamed = append(streamed, r.ID) }})
	if len(rs) != len(cs) || len(streamed) != len(cs) {
		t.Fatalf("got %d results, %d streamed; want %d", len(rs), len(streamed), len(cs))
	}
	want := []struct {
		id  string
		sev Severity
	}{
		{"t.ok", OK}, {"t.empty", OK}, {"t.err", Skipped}, {"t.panic", Error}, {"t.slow", Skipped}, {"t.root", Skipped},
	}
	for i, w := range want {
		r := rs[i]
		if r.ID != w.id {
			t.Errorf("result %d is %s, want %s (order must follow input)", i, r.ID, w.id)
		}
		if got := r.Worst(); got != w.sev {
			t.Errorf("%s: worst = %s, want %s (%+v)", w.id, got, w.sev, r.Findings)
		}
		for _, f := range r.Findings {
			if f.Check != w.id {
				t.Errorf("%s: finding has check %q", w.id, f.Check)
			}
		}
	}
	if !rs[3].Panicked {
		t.Error("panic not flagged")
	}
	if ExitCode(rs) != 1 {
		t.Errorf("ExitCode = %d, want 1 (panic counts as an error)", ExitCode(rs))
	}
}

func TestRegistrySelect(t *testing.T) {
	noop := func(context.Context, *host.Host) ([]Finding, error) { return nil, nil }
	r, err := NewRegistry(
		Check{ID: "shm.mount", Category: "shm", Run: noop},
		Check{ID: "shm.segments", Category: "shm", Run: noop},
		Check{ID: "env.nccl", Category: "env", Run: noop},
	)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ids     []string
		want    int
		wantErr bool
	}{
		{nil, 3, false},
		{[]string{"shm"}, 2, false},
		{[]string{"env.nccl", "shm.mount"}, 2, false},
		{[]string{"gpu.nope"}, 0, true},
	}
	for _, tt := range tests {
		got, err := r.Select(tt.ids)
		if (err != nil) != tt.wantErr || len(got) != tt.want {
			t.Errorf("Select(%v) = %d checks, err %v; want %d, err %v", tt.ids, len(got), err, tt.want, tt.wantErr)
		}
	}
	if _, err := NewRegistry(Check{ID: "a.b", Run: noop}, Check{ID: "a.b", Run: noop}); err == nil {
		t.Error("duplicate IDs accepted")
	}
	if _, err := NewRegistry(Check{ID: "nodot", Run: noop}); err == nil {
		t.Error("undotted ID accepted")
	}
}

func TestSeverityJSON(t *testing.T) {
	for _, s := range []Severity{OK, Info, Warn, Error, Skipped} {
		b, err := s.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back Severity
		if err := back.UnmarshalJSON(b); err != nil || back != s {
			t.Errorf("round trip %s -> %s -> %s (%v)", s, b, back, err)
		}
	}
}
