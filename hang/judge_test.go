package hang

import (
	"fmt"
	"testing"
)

func TestJudgeSamples(t *testing.T) {
	spin := func(rank int) RankSample {
		return RankSample{Rank: rank, PID: 100 + rank, States: [2]string{"R", "R"}, CPUPct: 98, Threads: 8, RanThreads: 3}
	}
	with := func(s RankSample, f func(*RankSample)) RankSample { f(&s); return s }
	cases := []struct {
		name     string
		ss       []RankSample
		suspects string
		stuck    bool
	}{
		{"all spin", []RankSample{spin(0), spin(1)}, "[]", false},
		{"one asleep while others spin", []RankSample{spin(0), with(spin(1), func(s *RankSample) { s.States = [2]string{"S", "S"}; s.CPUPct = 0.5 }), spin(2)}, "[1]", false},
		{"starved but runnable is not idle", []RankSample{spin(0), with(spin(1), func(s *RankSample) { s.CPUPct = 2 })}, "[]", false},
		{"stopped", []RankSample{spin(0), with(spin(1), func(s *RankSample) { s.States = [2]string{"T", "T"}; s.CPUPct = 0 })}, "[1]", false},
		{"uninterruptible", []RankSample{spin(0), with(spin(1), func(s *RankSample) { s.States = [2]string{"D", "D"}; s.Blocked = []int{101} })}, "[1]", false},
		{"gone", []RankSample{spin(0), {Rank: 1, Gone: true}}, "[1]", false},
		{"all asleep: the job waits elsewhere", []RankSample{
			with(spin(0), func(s *RankSample) { s.States = [2]string{"S", "S"}; s.CPUPct = 0 }),
			with(spin(1), func(s *RankSample) { s.States = [2]string{"S", "S"}; s.CPUPct = 1 }),
		}, "[]", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, stuck := JudgeSamples(tc.ss)
			got := fmt.Sprint(Suspects(ev))
			if got != tc.suspects || stuck != tc.stuck {
				t.Fatalf("suspects %s stuck %v, want %s %v: %+v", got, stuck, tc.suspects, tc.stuck, ev)
			}
		})
	}
}
