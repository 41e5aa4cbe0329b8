package tui

import (
	"context"
	"fmt"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/keytest"
)

// A key on the confirm step of a cleanup of n segments, list expanded: the
// cost of a key press and the frame it draws.
func BenchmarkConfirmScroll(b *testing.B) {
	for _, n := range []int{30, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			w := &longWorld{}
			d := w.deps()
			rm := make([]string, n)
			for i := range rm {
				rm[i] = fmt.Sprintf("rm -- /dev/shm/nccl-seg%06d   # 1.0 MiB, 2 h old", i)
			}
			d.PlanFixes = func(context.Context, []checks.Finding) []FixView {
				return []FixView{{ID: "shm.cleanup", Title: fmt.Sprintf("Remove %d orphaned segments", n), Risk: "low", Preview: rm}}
			}
			m := press(b, newTestModel(b, d), "enter", "tab", "tab", "space", "enter", "e")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				nm, _ := m.Update(keytest.Press("pgdown"))
				m = nm.(Model)
				_ = m.View()
			}
		})
	}
}

// The checks finishing while planning takes a second (proc.stale's CPU
// sample): the Update that takes the last result must not wait for it.
func BenchmarkChecksDoneWhilePlanningIsSlow(b *testing.B) {
	w := &longWorld{}
	d := w.deps()
	d.PlanFixes = func(context.Context, []checks.Finding) []FixView {
		time.Sleep(time.Second)
		return nil
	}
	m, held := driveHolding(b, newTestModel(b, d), keytest.Press("enter"), func(msg tea.Msg) bool { _, ok := msg.(detectDoneMsg); return ok })
	if len(held) != 1 {
		b.Fatalf("%d detectDoneMsg held", len(held))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		nm, _ := m.Update(held[0])
		_ = nm.(Model).View()
	}
}
