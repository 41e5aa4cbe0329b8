package steps

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/guides"
	"github.com/ncclwiz/ncclwiz/scenario"
)

// shmSizes finds every /dev/shm size a text proposes, in GiB.
var shmSizes = regexp.MustCompile(`(?:--shm-size=|remount,size=|sizeLimit: |shm_size: ")(\d+)(?:g|G|Gi|gb)\b`)

// Issue 13 item 7: the guides said 1g and 32G, container.shm 8g and
// shm.remount half of RAM. Now one rule (shm.SizeRule, shm.RecommendedSize)
// gives one number, and the check, every fix, the exported script and the
// guides agree on it.
func TestOneShmSizeEverywhere(t *testing.T) {
	lib, err := guides.Load()
	if err != nil {
		t.Fatal(err)
	}
	capGiB := fmt.Sprint(shm.RecommendedCap >> 30)
	stated := false
	for _, lang := range []string{"en", "zh"} {
		for _, g := range lib.List(lang) {
			for _, m := range shmSizes.FindAllStringSubmatch(g.Body, -1) {
				if m[1] != capGiB {
					t.Errorf("guide %s (%s) proposes %q; the rule gives %s GiB", g.ID, lang, m[0], capGiB)
				}
			}
			body := strings.Join(strings.Fields(strings.ReplaceAll(g.Body, "**", "")), " ")
			stated = stated || strings.Contains(body, shm.SizeRule)
		}
	}
	if !stated {
		t.Errorf("no guide states the rule %q", shm.SizeRule)
	}

	ctx := context.Background()
	for _, name := range []string{"shm-orphans", "docker-small-shm"} {
		t.Run(name, func(t *testing.T) {
			s, err := scenario.Build(name)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			h := s.Host
			rec := shm.RecommendedSize(h)
			want := []string{"size=" + rec.Option(), "--shm-size=" + rec.Option(), fmt.Sprintf("sizeLimit: %dGi", rec.GiB())}
			findings := scenarioFindings(t, h)
			var text strings.Builder
			for _, f := range findings {
				if f.Check == "shm.mount" && f.Evidence != nil {
					if got, ok := f.Evidence["recommended_size_bytes"]; ok && got != rec.Bytes {
						t.Errorf("shm.mount recommends %v, the rule %d", got, rec.Bytes)
					}
				}
				if f.Check == "shm.mount" || f.Check == "host.container" {
					text.WriteString(f.Detail + "\n")
				}
			}
			plan := PlanFor(ctx, h, findings, []string{"shm.remount", "shm.persist", "container.shm"})
			for _, fx := range plan {
				text.WriteString(fx.Title + "\n" + fx.Summary + "\n" + fx.Impossible + "\n" + fx.Alternative + "\n" + strings.Join(fx.Preview(), "\n") + "\n")
			}
			all := text.String()
			for _, m := range shmSizes.FindAllStringSubmatch(all, -1) {
				if m[1] != fmt.Sprint(rec.GiB()) {
					t.Errorf("%q, but the rule gives %s", m[0], rec.Option())
				}
			}
			if !strings.Contains(all, want[1]) {
				t.Errorf("no %q in:\n%s", want[1], all)
			}
			if rm, ok := ByID(plan, "shm.remount"); ok && rm.Impossible == "" && !strings.Contains(strings.Join(rm.Preview(), "\n"), want[0]) {
				t.Errorf("shm.remount: %v", rm.Preview())
			}
			if rec.Bytes == 1007<<30 || rec.Bytes > shm.RecommendedCap {
				t.Errorf("recommended %d: more than the cap", rec.Bytes)
			}
		})
	}
}

// In a container, whether /dev/shm can be resized from inside is said the
// same way by the container finding, shm.mount, shm.remount and
// container.shm: without CAP_SYS_ADMIN shm.remount is impossible with
// container.shm as the alternative; with it, everyone says it can be grown
// until the container restarts.
func TestContainerResizeIsToldConsistently(t *testing.T) {
	for _, tt := range []struct {
		name     string
		capEff   string
		apparmor string
		can      bool
	}{
		{"no CAP_SYS_ADMIN (docker's default)", "00000000a80425fb", "", false},
		{"CAP_SYS_ADMIN, unconfined", "000001ffffffffff", "unconfined\n", true},
		{"CAP_SYS_ADMIN under docker-default AppArmor", "000001ffffffffff", "docker-default (enforce)\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := scenario.Build("docker-small-shm")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			h := s.Host
			writeFile(t, h.Path("/proc/self/status"), "Name:\tncclwiz\nCapEff:\t"+tt.capEff+"\n")
			if tt.apparmor != "" {
				writeFile(t, h.Path("/proc/self/attr/current"), tt.apparmor)
			}
			findings := scenarioFindings(t, h)
			plan := PlanFor(context.Background(), h, findings, []string{"shm.remount", "container.shm"})
			rm, _ := ByID(plan, "shm.remount")
			cs, _ := ByID(plan, "container.shm")
			var texts []string
			for _, f := range findings {
				if f.Check == "host.container" || (f.Check == "shm.mount" && f.Severity.IsProblem()) {
					texts = append(texts, f.Detail)
				}
			}
			texts = append(texts, cs.Summary, rm.Summary+" "+rm.Impossible)
			hasCap := tt.can
			if hasCap != (rm.Impossible == "") {
				t.Errorf("shm.remount impossible=%q with CAP_SYS_ADMIN=%v", rm.Impossible, hasCap)
			}
			if !hasCap && !strings.Contains(rm.Alternative, "container.shm") {
				t.Errorf("alternative: %q", rm.Alternative)
			}
			if tt.apparmor == "docker-default (enforce)\n" && !strings.Contains(rm.Impossible, "AppArmor profile docker-default forbids mount") {
				t.Errorf("impossible: %q", rm.Impossible)
			}
			for _, x := range texts {
				if strings.Contains(x, "cannot be resized from inside") && hasCap {
					t.Errorf("says it cannot be resized although it can: %q", x)
				}
				if strings.Contains(x, "can grow it now") && !hasCap {
					t.Errorf("says it can be grown although it cannot: %q", x)
				}
			}
			var c checks.Finding
			for _, f := range findings {
				if f.Check == "host.container" {
					c = f
				}
			}
			if c.Evidence["can_remount"] != hasCap {
				t.Errorf("host.container evidence: %v", c.Evidence)
			}
		})
	}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Issue 13 item 7: RemoveIPC=yes was reported (and its fix offered) in a
// container whose image has logind.conf but where systemd-logind does not
// run. On the bare-metal scenario logind runs (/run/systemd/seats).
func TestRemoveIPCOnlyWhereLogindRuns(t *testing.T) {
	for _, tt := range []struct {
		scenario string
		offered  bool
	}{{"docker-small-shm", false}, {"shm-orphans", true}} {
		t.Run(tt.scenario, func(t *testing.T) {
			s, err := scenario.Build(tt.scenario)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			findings := scenarioFindings(t, s.Host)
			reported := false
			for _, f := range findings {
				if f.Check == "host.ipc" && strings.Contains(f.Title, "RemoveIPC=yes") {
					reported = true
				}
			}
			plan, notes := PlanWith(context.Background(), s.Host, findings, PlanOptions{Want: []string{"systemd.removeipc"}})
			_, offered := ByID(plan, "systemd.removeipc")
			if reported != tt.offered || offered != tt.offered {
				t.Errorf("RemoveIPC reported %v, fix offered %v (%q); want %v", reported, offered, notes["systemd.removeipc"], tt.offered)
			}
			if !tt.offered && !strings.Contains(notes["systemd.removeipc"], "does not run here") {
				t.Errorf("note: %q", notes["systemd.removeipc"])
			}
		})
	}
}
