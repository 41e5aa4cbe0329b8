package checks

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
)

// Tier says how expensive a check is. Every check is quick today (the
// --deep tier went with its flag); the field stays in --list-checks.
type Tier string

// Quick checks run by default.
const Quick Tier = "quick"

// Need is a precondition of a check.
type Need string

// Needs a check may declare. The engine enforces NeedRoot (skips with
// "needs root"); the others are informational and the check itself reports
// a skipped finding with the precise reason (no driver, no permission …).
const (
	NeedRoot Need = "root"
	NeedGPU  Need = "gpu"
)

// Func is the body of a check. It returns findings, or an error when it
// could not look at all (the engine turns that into a skipped finding).
type Func func(ctx context.Context, h *host.Host) ([]Finding, error)

// Check is a named, self-contained look at one aspect of the machine.
type Check struct {
	// ID is dotted and stable, e.g. "shm.segments".
	ID       string
	Title    string
	Category string
	Tier     Tier
	Needs    []Need
	// Timeout overrides the engine default for this check.
	Timeout time.Duration
	Run     Func
}

// Registry is an ordered set of checks with unique IDs.
type Registry struct {
	checks []Check
	byID   map[string]int
}

// NewRegistry builds a registry, refusing duplicate or malformed IDs.
func NewRegistry(cs ...Check) (*Registry, error) {
	r := &Registry{byID: map[string]int{}}
	for _, c := range cs {
		if err := r.Add(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Add appends a check.
func (r *Registry) Add(c Check) error {
	if c.ID == "" || !strings.Contains(c.ID, ".") || c.Run == nil {
		return fmt.Errorf("check %q: needs a dotted ID and a Run function", c.ID)
	}
	if _, dup := r.byID[c.ID]; dup {
		return fmt.Errorf("check %q registered twice", c.ID)
	}
	if c.Tier == "" {
		c.Tier = Quick
	}
	r.byID[c.ID] = len(r.checks)
	r.checks = append(r.checks, c)
	return nil
}

// All returns the checks in registration order.
func (r *Registry) All() []Check { return append([]Check(nil), r.checks...) }

// Get returns the check with the given ID.
func (r *Registry) Get(id string) (Check, bool) {
	i, ok := r.byID[id]
	if !ok {
		return Check{}, false
	}
	return r.checks[i], true
}

// Select returns the checks named by ids (exact IDs or a category prefix such
// as "shm" or "gpu."), in registration order. Unknown names are an error.
func (r *Registry) Select(ids []string) ([]Check, error) {
	if len(ids) == 0 {
		return r.All(), nil
	}
	want := map[int]bool{}
	var unknown []string
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		if i, ok := r.byID[id]; ok {
			want[i] = true
			continue
		}
		prefix := strings.TrimSuffix(id, ".") + "."
		found := false
		for i, c := range r.checks {
			if strings.HasPrefix(c.ID, prefix) || c.Category == id {
				want[i], found = true, true
			}
		}
		if !found {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown check %s (see --list-checks)", strings.Join(unknown, ", "))
	}
	var out []Check
	for i, c := range r.checks {
		if want[i] {
			out = append(out, c)
		}
	}
	return out, nil
}
