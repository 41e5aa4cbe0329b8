package report

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/termio"
)

type holder struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
}

func TestSanitizeFindingHandlesEveryEvidenceShape(t *testing.T) {
	var nilMap map[string]string
	f := checks.Finding{Check: "x.y", Severity: checks.Warn, Title: "bad \x1b[31mname",
		Detail: "line one\nline \x1b]0;title\x07two",
		Evidence: map[string]any{
			"nil":      nil,
			"nil_map":  nilMap,
			"str":      "nccl-\x1b[2J",
			"strs":     []string{"ok", "\x00zero"},
			"structs":  []holder{{PID: 7, Comm: "py\x1bthon"}},
			"map":      map[string]string{"NCCL_DEBUG": "INFO", "HF_TOKEN_X": "hf_abcdefghijklmnopqrstuvwxyz"},
			"nested":   map[string]any{"inner": []any{"a\x1b", 1, nil, true}},
			"number":   uint64(1) << 60,
			"bool":     true,
			"time":     time.Unix(0, 0).UTC(),
			"severity": checks.Error,
		},
	}
	got := SanitizeFinding(f)
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(`\u001b`)) || bytes.Contains(b, []byte(`\u0000`)) || bytes.Contains(b, []byte("hf_abc")) {
		t.Errorf("unsanitised output: %s", b)
	}
	if !strings.Contains(got.Detail, "\n") {
		t.Error("detail lost its line break")
	}
	if got.Evidence["number"] != uint64(1)<<60 || got.Evidence["bool"] != true {
		t.Errorf("scalars changed: %v %v", got.Evidence["number"], got.Evidence["bool"])
	}
}

func TestPlainAndJSON(t *testing.T) {
	h := &host.Host{Kind: "fixture", Name: "node\x1b[1m", Clock: func() time.Time { return time.Unix(0, 0) }}
	rs := checks.Run(context.Background(), h, []checks.Check{
		{ID: "a.ok", Title: "fine", Run: func(context.Context, *host.Host) ([]checks.Finding, error) { return nil, nil }},
		{ID: "b.bad", Title: "broken", Run: func(context.Context, *host.Host) ([]checks.Finding, error) {
			return []checks.Finding{{Severity: checks.Error, Title: "it broke", Guide: "shm-no-space", Fixes: []string{"shm.cleanup"}}}, nil
		}},
	}, checks.Options{})
	var out bytes.Buffer
	if err := WritePlain(termio.New(&out, []string{"LANG=C.UTF-8"}, false), h, rs, PlainOptions{Verbose: true}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a.ok", "✗ b.bad", "it broke", "→ ncclwiz fix --apply shm.cleanup", "1 problem found (1 error, 0 warnings)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plain report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "\x1b") {
		t.Error("escape bytes in a non-terminal report")
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, h, rs, "test"); err != nil {
		t.Fatal(err)
	}
	var doc JSONReport
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Summary.Errors != 1 || doc.Summary.ExitCode != 1 || doc.Host.Name != `node\x1b[1m` || len(doc.Checks) != 2 {
		t.Errorf("json = %+v", doc)
	}
}

// At 80 columns (an SSH session) nothing is wider than the terminal: long
// titles wrap under themselves and hints break between commands.
func TestPlainWrapsAtTheTerminalWidth(t *testing.T) {
	h := &host.Host{Kind: "fixture", Name: "n"}
	long := "12 orphaned NCCL segments and 1 other hold 110.3 MiB in /dev/shm (left by a crashed job)"
	rs := checks.Run(context.Background(), h, []checks.Check{
		{ID: "shm.segments", Title: "segments", Run: func(context.Context, *host.Host) ([]checks.Finding, error) {
			return []checks.Finding{{Severity: checks.Error, Title: long, Guide: "shm-stale-segments",
				Fixes: []string{"shm.cleanup", "shm.remount", "container.shm"}}}, nil
		}},
	}, checks.Options{})
	var out bytes.Buffer
	o := termio.New(&out, []string{"LANG=C.UTF-8"}, false)
	o.Width = 80
	if err := WritePlain(o, h, rs, PlainOptions{}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, l := range strings.Split(text, "\n") {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
	// Read it back as words, without the timing column.
	timing := regexp.MustCompile(`\s+(?:<1ms|\d+ms|\d+\.\ds)$`)
	var words []string
	for _, l := range strings.Split(text, "\n") {
		words = append(words, strings.Fields(timing.ReplaceAllString(l, ""))...)
	}
	joined := strings.Join(words, " ")
	for _, want := range []string{long, "→ ncclwiz fix --apply shm.cleanup,shm.remount,container.shm", "ncclwiz guides shm-stale-segments"} {
		if !strings.Contains(joined, want) {
			t.Errorf("lost %q in:\n%s", want, text)
		}
	}
	if strings.Contains(text, "shm.cleanup,shm.remount,container.shm · ncclwiz guides") {
		t.Errorf("hints should have broken between commands:\n%s", text)
	}
}

// TestSanitizeFindingRedactsByKey: a value that carries no secret shape is
// still secret when its key (an env map) or its record's name says so;
// URL passwords with an empty user go too. Ordinary values stay.
func TestSanitizeFindingRedactsByKey(t *testing.T) {
	f := checks.Finding{Check: "env.nccl", Severity: checks.Info, Title: "NCCL_NET=redis://:pw9@host",
		Evidence: map[string]any{
			"env":      map[string]string{"WANDB_API_KEY": "plainvalue1", "NCCL_SOCKET_IFNAME": "eth0"},
			"settings": []map[string]any{{"name": "MY_PASSWORD", "value": "plainvalue2", "source": "environment"}, {"name": "NCCL_NET", "value": "redis://:plainvalue3@host", "source": "environment"}},
			"cmdline":  "python train.py --hf_token plainvalue4 --master_port 29500",
		}}
	got := SanitizeFinding(f)
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"plainvalue", "pw9"} {
		if bytes.Contains(b, []byte(leak)) {
			t.Errorf("%s leaked: %s", leak, b)
		}
	}
	for _, kept := range []string{`"NCCL_SOCKET_IFNAME":"eth0"`, `--master_port 29500`, `"source":"environment"`, `redis://:[redacted]@host`} {
		if !bytes.Contains(b, []byte(kept)) {
			t.Errorf("want %s in %s", kept, b)
		}
	}
}
