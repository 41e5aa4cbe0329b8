package scenario

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEveryScenarioBuilds(t *testing.T) {
	list, err := List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) < 6 {
		t.Fatalf("want at least 6 scenarios, got %d", len(list))
	}
	for _, info := range list {
		t.Run(info.Name, func(t *testing.T) {
			if info.Title == "" || info.Description == "" || info.Lesson == "" {
				t.Errorf("scenario needs a title, description and lesson: %+v", info)
			}
			s, err := Build(info.Name)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			h := s.Host
			if !h.Simulated || h.Kind != "scenario" {
				t.Errorf("host not marked simulated: %+v", h)
			}
			if info.Log != "" {
				if _, err := os.Stat(s.LogPath); err != nil {
					t.Errorf("log: %v", err)
				}
			}
			st, err := h.Statfs(h.ShmLogical())
			if err != nil {
				t.Fatalf("statfs shm: %v", err)
			}
			if st.Total() == 0 || st.Used() > st.Total() {
				t.Errorf("statfs: %+v", st)
			}
		})
	}
}

func TestCleanupInSimulationFreesSpace(t *testing.T) {
	s, err := Build("shm-orphans")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before, _ := s.Host.Statfs("/dev/shm")
	if err := os.Remove(filepath.Join(s.Host.ShmReal(), "nccl-1aZ0pQ")); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Host.Statfs("/dev/shm")
	if freed := before.Used() - after.Used(); freed < 9<<20 {
		t.Errorf("removing a 9.2 MiB segment freed %d bytes in the simulation", freed)
	}
	if s.Host.ShmReal() == "/dev/shm" {
		t.Fatal("simulation points at the real /dev/shm")
	}
}

func TestUnknownScenario(t *testing.T) {
	if _, err := Build("nope"); err == nil {
		t.Fatal("unknown scenario accepted")
	}
}
