package envcheck

import (
	"context"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
)

func titles(fs []checks.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.Severity.String() + ": " + f.Title + "\n")
	}
	return b.String()
}

func TestEnvNCCL(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		files    map[string]any
		want     []string // substrings of titles that must appear
		wantSev  []checks.Severity
		problems int
	}{
		{name: "clean", env: map[string]string{"NCCL_DEBUG": "INFO", "PATH": "/bin"},
			want: []string{"1 NCCL/PyTorch setting found, none suspicious"}, wantSev: []checks.Severity{checks.OK}},
		{name: "nothing set suggests NCCL_DEBUG", env: map[string]string{},
			want: []string{"No NCCL_", "NCCL_DEBUG is not set"}, wantSev: []checks.Severity{checks.OK, checks.Info}},
		{name: "invented NCCL_TIMEOUT", env: map[string]string{"NCCL_DEBUG": "WARN", "NCCL_TIMEOUT": "1800"},
			want: []string{"NCCL_TIMEOUT does not exist"}, wantSev: []checks.Severity{checks.Warn}, problems: 1},
		{name: "invented NCCL_SHM_DIR", env: map[string]string{"NCCL_DEBUG": "WARN", "NCCL_SHM_DIR": "/scratch"},
			want: []string{"NCCL_SHM_DIR does not exist"}, wantSev: []checks.Severity{checks.Warn}, problems: 1},
		{name: "typo with suggestion", env: map[string]string{"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAM": "eth0"},
			want: []string{"NCCL_SOCKET_IFNAM is not a known NCCL or PyTorch variable; did you mean NCCL_SOCKET_IFNAME?"}, wantSev: []checks.Severity{checks.Warn}, problems: 1},
		{name: "deprecated torch name", env: map[string]string{"NCCL_DEBUG": "INFO", "NCCL_ASYNC_ERROR_HANDLING": "1"},
			want: []string{"NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING"}, wantSev: []checks.Severity{checks.Info}},
		{name: "renamed nccl name is a warning", env: map[string]string{"NCCL_DEBUG": "INFO", "NCCL_IB_GDR_LEVEL": "PHB"},
			want: []string{"NCCL_IB_GDR_LEVEL is deprecated; use NCCL_NET_GDR_LEVEL"}, wantSev: []checks.Severity{checks.Warn}, problems: 1},
		{name: "bad values", env: map[string]string{"NCCL_DEBUG": "VERBOSE", "NCCL_P2P_DISABLE": "yes", "NCCL_BUFFSIZE": "4M"},
			want:    []string{"NCCL_DEBUG=VERBOSE is not a valid value", "NCCL_P2P_DISABLE=yes is not a valid value", "NCCL_BUFFSIZE=4M is not a valid value"},
			wantSev: []checks.Severity{checks.Warn, checks.Warn, checks.Warn}, problems: 3},
		{name: "contradiction", env: map[string]string{"NCCL_DEBUG": "INFO", "NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"},
			want: []string{"force GPUs on one node onto the network"}, wantSev: []checks.Severity{checks.Warn}, problems: 1},
		{name: "P2P level LOC", env: map[string]string{"NCCL_DEBUG": "INFO", "NCCL_P2P_LEVEL": "LOC"},
			want: []string{"NCCL_P2P_LEVEL=LOC"}, wantSev: []checks.Severity{checks.Warn}, problems: 1},
		{name: "old and new names disagree", env: map[string]string{"NCCL_DEBUG": "INFO", "NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"},
			want: []string{"disagree"}, wantSev: []checks.Severity{checks.Warn}, problems: 1},
		{name: "config files", env: map[string]string{"NCCL_DEBUG": "INFO"},
			files: map[string]any{
				"/etc/nccl.conf":        "# site defaults\nNCCL_DEBUG=WARN\nNCCL_TIMEOUT=600\nthis is junk\n",
				"/home/user/.nccl.conf": "NCCL_SOCKET_IFNAME=ib\n",
			},
			want:    []string{"NCCL_TIMEOUT (in /etc/nccl.conf) does not exist", "Unparsable line", "NCCL_DEBUG in /etc/nccl.conf is overridden by the environment"},
			wantSev: []checks.Severity{checks.Warn, checks.Warn, checks.Info}, problems: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := ft.Tree(t, tt.files, host.FixtureSpec{UID: 1000, Home: "/home/user", Env: tt.env})
			fs, err := run(context.Background(), h)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tt.want {
				found := false
				for _, f := range fs {
					if strings.Contains(f.Title, w) {
						found = true
						if f.Severity != tt.wantSev[i] {
							t.Errorf("%q: severity %s, want %s", w, f.Severity, tt.wantSev[i])
						}
						if f.Guide == "" && f.Severity != checks.OK {
							t.Errorf("%q: no guide", w)
						}
					}
				}
				if !found {
					t.Errorf("no finding containing %q in\n%s", w, titles(fs))
				}
			}
			if e, w := checks.Problems(fs); e+w != tt.problems {
				t.Errorf("%d problems, want %d:\n%s", e+w, tt.problems, titles(fs))
			}
		})
	}
}

func TestSecretsAreRedactedInEvidence(t *testing.T) {
	h := ft.Tree(t, nil, host.FixtureSpec{Env: map[string]string{"NCCL_DEBUG": "INFO", "TORCH_DISTRIBUTED_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5", "NCCL_AUTH_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz"}})
	fs, _ := run(context.Background(), h)
	for _, s := range fs[0].Evidence["settings"].([]map[string]any) {
		if strings.Contains(s["value"].(string), "hf_abc") {
			t.Errorf("secret leaked in evidence: %v", s)
		}
	}
}
