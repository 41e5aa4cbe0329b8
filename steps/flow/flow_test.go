package flow

import (
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
)

func TestRouting(t *testing.T) {
	problem := []checks.Result{{ID: "shm.segments", Findings: []checks.Finding{{Severity: checks.Warn}}}}
	healthy := []checks.Result{{ID: "shm.mount", Findings: []checks.Finding{{Severity: checks.OK}}}}
	tests := []struct {
		name string
		s    State
		from Stage
		next Stage
		prev Stage
	}{
		{"start goes to detect", State{}, Start, Detect, Start},
		{"detect waits until done", State{}, Detect, Detect, Start},
		{"detect to findings", State{Detected: true, Results: problem}, Detect, Findings, Start},
		{"findings to explain when guides exist", State{Detected: true, Results: problem, GuideCount: 1, FixCount: 1}, Findings, Explain, Start},
		{"findings skip explain without guides", State{Detected: true, Results: problem, FixCount: 1}, Findings, Fix, Start},
		{"healthy skips explain and fix", State{Detected: true, Results: healthy, CanValidate: true}, Findings, Validate, Start},
		{"choosing does not route to apply", State{Detected: true, FixCount: 2}, Fix, Validate, Findings},
		{"fix to apply once applied", State{Detected: true, FixCount: 2, Applied: true}, Fix, Apply, Findings},
		{"fix shown while planning", State{Detected: true, Results: problem, FixesPending: true}, Findings, Fix, Start},
		{"no fix once planned empty", State{Detected: true, Results: problem}, Findings, Validate, Start},
		{"fix skips apply when nothing chosen", State{Detected: true, FixCount: 2}, Fix, Validate, Findings},
		{"validate skipped on request", State{Detected: true, FixCount: 2, SkipValidate: true}, Fix, Summary, Findings},
		{"back from validate skips apply", State{Detected: true, FixCount: 1, Applied: true}, Validate, Summary, Fix},
		{"back from summary", State{Detected: true, GuideCount: 1, SkipValidate: true}, Summary, Summary, Explain},
		{"side entries return to start", State{}, Learn, Start, Start},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Next(tt.from); got != tt.next {
				t.Errorf("Next(%s) = %s, want %s", tt.from, got, tt.next)
			}
			if got := tt.s.Prev(tt.from); got != tt.prev {
				t.Errorf("Prev(%s) = %s, want %s", tt.from, got, tt.prev)
			}
		})
	}
	if n := len((State{Results: problem}).Problems()); n != 1 {
		t.Errorf("Problems() = %d, want 1", n)
	}
}
