package proctab

import (
	"context"
	"testing"

	"github.com/shirou/gopsutil/v4/process"

	"github.com/ncclwiz/ncclwiz/host"
)

// The real /proc read two ways, same fields: this package (one direct read
// of stat and status, gopsutil for the list, command line and environment)
// against gopsutil's accessors alone. The package comment cites the result.

var benchEnv = []string{"RANK", "LOCAL_RANK", "WORLD_SIZE"}

func BenchmarkTableProctab(b *testing.B) {
	h := host.Local(host.LocalOptions{NoNVML: true})
	ctx := context.Background()
	for b.Loop() {
		if _, err := Read(ctx, h, Options{EnvKeys: benchEnv}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTableGopsutilOnly(b *testing.B) {
	h := host.Local(host.LocalOptions{NoNVML: true})
	ctx := h.GopsutilContext(context.Background())
	for b.Loop() {
		pids, err := process.PidsWithContext(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, pid := range pids {
			p := &process.Process{Pid: pid}
			if _, err := p.PpidWithContext(ctx); err != nil {
				continue
			}
			_, _ = p.StatusWithContext(ctx)
			_, _ = p.UidsWithContext(ctx)
			_, _ = p.NumThreadsWithContext(ctx)
			_, _ = p.NameWithContext(ctx)
			_, _ = p.TimesWithContext(ctx)
			_, _ = p.CreateTimeWithContext(ctx)
			_, _ = p.CmdlineSliceWithContext(ctx)
			_, _ = p.EnvironWithContext(ctx)
		}
	}
}

// Threads of one process, as the CPU sample reads them.
func BenchmarkTasksProctab(b *testing.B) {
	h := host.Local(host.LocalOptions{NoNVML: true})
	for b.Loop() {
		if _, err := Tasks(h, 1); err != nil {
			b.Skip(err)
		}
	}
}

func BenchmarkTasksGopsutil(b *testing.B) {
	h := host.Local(host.LocalOptions{NoNVML: true})
	ctx := h.GopsutilContext(context.Background())
	p := &process.Process{Pid: 1}
	for b.Loop() {
		if _, err := p.ThreadsWithContext(ctx); err != nil {
			b.Skip(err)
		}
	}
}

// The table as the collective test's teardown polls it: stat alone.
func BenchmarkTableStatOnly(b *testing.B) {
	h := host.Local(host.LocalOptions{NoNVML: true})
	ctx := context.Background()
	for b.Loop() {
		if _, err := Read(ctx, h, Options{StatOnly: true}); err != nil {
			b.Fatal(err)
		}
	}
}
