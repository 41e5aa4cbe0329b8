package remote

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/cluster"
	"github.com/ncclwiz/ncclwiz/internal/hostiletest"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		stderr   string
		exit     int
		timedOut bool
		status   cluster.Status
		reason   string
	}{
		{"ssh: Could not resolve hostname gpu9: Name or service not known", 255, false, cluster.StatusUnreachable, "dns"},
		{"ssh: Could not resolve hostname gpu9: Temporary failure in name resolution", 255, false, cluster.StatusUnreachable, "dns"},
		{"ssh: connect to host 10.0.0.5 port 22: Connection refused", 255, false, cluster.StatusUnreachable, "refused"},
		{"root@10.0.0.5: Permission denied (publickey).", 255, false, cluster.StatusUnreachable, "auth"},
		{"Host key verification failed.", 255, false, cluster.StatusUnreachable, "host-key"},
		{"Connection timed out during banner exchange", 255, false, cluster.StatusTimeout, "timeout"},
		{"ssh: connect to host 10.0.0.5 port 22: Connection timed out", 255, false, cluster.StatusTimeout, "timeout"},
		{"", -1, true, cluster.StatusTimeout, "timeout"},
		{"ssh: connect to host 10.0.0.5 port 22: No route to host", 255, false, cluster.StatusUnreachable, "no-route"},
		{"kex_exchange_identification: Connection closed by remote host", 255, false, cluster.StatusUnreachable, "closed"},
		{"something odd", 255, false, cluster.StatusUnreachable, "ssh-error"},
		{"sh: 1: ncclwiz: not found", 127, false, cluster.StatusFailed, "remote-error"},
	}
	for _, tt := range tests {
		st, r := classify(tt.stderr, tt.exit, tt.timedOut)
		if st != tt.status || r != tt.reason {
			t.Errorf("%q exit %d: %s/%s, want %s/%s", tt.stderr, tt.exit, st, r, tt.status, tt.reason)
		}
	}
}

func TestParseProbeAndClock(t *testing.T) {
	out := []byte("Welcome to gpu7!\n" + markDate + " 1700000000.250000000\n" + markVersion + " ncclwiz 1.2 (go1.26)\n" + markSum + " abc123\n")
	p := parseProbe(out)
	if !p.present || p.version != "ncclwiz 1.2 (go1.26)" || p.sum != "abc123" || p.clock == nil || p.clock.UnixNano() != 1700000000250000000 {
		t.Fatalf("probe %+v", p)
	}
	if p := parseProbe([]byte(markDate + " 1700000000.%N\n" + markMissing + "\n")); p.present || p.clock == nil || p.clock.Unix() != 1700000000 {
		t.Errorf("busybox date / missing binary: %+v", p)
	}
	if p := parseProbe([]byte(markDate + " garbage\n")); p.clock != nil {
		t.Errorf("garbage date parsed: %v", p.clock)
	}
	sent := time.Unix(1000, 0)
	off, e := clockOffset(time.Unix(1100, 0), sent, sent.Add(2*time.Second))
	if off != 99*time.Second || e != time.Second {
		t.Errorf("offset %s ± %s, want 99s ± 1s", off, e)
	}
}

// fakeNcclwiz is a stand-in binary for the copy script: it checks it was
// called as `check --json --no-color --only X` and prints a report.
const fakeNcclwiz = `#!/bin/sh
[ "$1 $2 $3 $4 $5" = "check --json --no-color --only shm.mount" ] || { echo "bad args: $*" >&2; exit 2; }
echo "running from $0"
echo '{"schema":1,"tool":"ncclwiz","version":"t","generated_at":"2026-01-01T00:00:00Z","host":{"name":"x","kind":"local","shm_dir":"/dev/shm","uid":0,"euid":0,"simulated":false},"summary":{"exit_code":0},"checks":[],"findings":[]}'
`

// TestCopyScriptRunsVerifiedAndRemoves runs the copy script with a real
// sh, as a node would: the binary arrives on stdin into a private temp
// dir, is verified, runs, and the dir is gone afterwards — also when the
// checksum does not match (then nothing runs).
func TestCopyScriptRunsVerifiedAndRemoves(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ncclwiz")
	if err := os.WriteFile(bin, []byte(fakeNcclwiz), 0o700); err != nil {
		t.Fatal(err)
	}
	sum, err := FileSum(bin)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := os.ReadFile(bin)
	extra := []string{"--only", "shm.mount"}
	tests := []struct {
		name, sum string
		exit      int
		wantOut   string
	}{
		{"verified copy runs", sum, 0, `"tool":"ncclwiz"`},
		{"checksum mismatch refuses", strings.Repeat("0", 64), exitBadSum, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			cmd := exec.Command("sh", "-c", copyScript(tt.sum, checkCmd(extra), time.Minute))
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			cmd.Stdin = bytes.NewReader(body)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if code != tt.exit || !strings.Contains(out.String(), tt.wantOut) {
				t.Fatalf("exit %d out %q err %q, want exit %d", code, out.String(), errb.String(), tt.exit)
			}
			if tt.exit == 0 {
				if !strings.Contains(out.String(), "running from "+tmp+"/ncclwiz.") {
					t.Errorf("did not run from a private dir under TMPDIR: %s", out.String())
				}
				if _, err := parseReport(out.Bytes()); err != nil {
					t.Errorf("report: %v", err)
				}
			}
			ents, _ := os.ReadDir(tmp)
			if len(ents) != 0 {
				t.Errorf("left behind: %v", ents)
			}
		})
	}
}

// TestCopySizedScriptLeavesStdin: the sized copy takes exactly the
// binary's bytes, so what follows on stdin reaches the program (a copied
// mesh listener's lifeline).
func TestCopySizedScriptLeavesStdin(t *testing.T) {
	body := []byte("#!/bin/sh\nprintf 'rest: '; cat\n")
	bin := filepath.Join(t.TempDir(), "ncclwiz")
	if err := os.WriteFile(bin, body, 0o700); err != nil {
		t.Fatal(err)
	}
	sum, err := FileSum(bin)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", copySizedScript(sum, len(body), nil, time.Minute))
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	cmd.Stdin = bytes.NewReader(append(body, "lifeline\n"...))
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "rest: lifeline\n" {
		t.Fatalf("%v: %q", err, out)
	}
}

func TestSharedScriptMissingBinary(t *testing.T) {
	cmd := exec.Command("sh", "-c", sharedScript("/nonexistent/ncclwiz", checkCmd(nil), time.Minute))
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 127 && ee.ExitCode() != 126 {
		t.Fatalf("err %v", err)
	}
	n := finish(cluster.Node{Name: "x"}, runResult{exit: ee.ExitCode(), stderr: errb.Bytes()}, Options{})
	if n.Status != cluster.StatusFailed || !strings.Contains(n.Error, "ncclwiz") {
		t.Errorf("%+v", n)
	}
}

func TestSrunArgs(t *testing.T) {
	three := []string{"n1", "n2", "n3"}
	tests := []struct {
		name  string
		spec  SlurmSpec
		bcast string
		want  string
	}{
		{"inside an allocation", SlurmSpec{JobID: "42", NodeList: "n[1-3]", Nodes: three}, "",
			"--nodes=3 --ntasks=3 --ntasks-per-node=1 --label --kill-on-bad-exit=0 --overlap --time=2 --jobid=42 --nodelist=n[1-3] sh -c X"},
		{"a node list, new step", SlurmSpec{NodeList: "n[1-3]", Nodes: three}, "",
			"--nodes=3 --ntasks=3 --ntasks-per-node=1 --label --kill-on-bad-exit=0 --overlap --time=2 --nodelist=n[1-3] --immediate=90 sh -c X"},
		{"broadcast copy", SlurmSpec{JobID: "7", Nodes: three}, "/tmp/ncclwiz-bcast-1",
			"--nodes=3 --ntasks=3 --ntasks-per-node=1 --label --kill-on-bad-exit=0 --overlap --time=2 --jobid=7 --bcast=/tmp/ncclwiz-bcast-1 sh -c X"},
	}
	for _, tt := range tests {
		got := strings.Join(srunArgs(tt.spec, 90*time.Second, tt.bcast, "sh", "-c", "X"), " ")
		if got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

func TestSrunLabelledOutput(t *testing.T) {
	out := "0: " + markNode + " gpu01\n1: " + markNode + " gpu02\n0: {\"a\":\n1: noise\n0: 1}\n"
	tasks := splitLabelled([]byte(out))
	names := taskNodes(tasks)
	by := byNode(tasks, names)
	if names["0"] != "gpu01" || names["1"] != "gpu02" {
		t.Fatalf("names %v", names)
	}
	if got := string(by["gpu01"]); got != markNode+" gpu01\n{\"a\":\n1}\n" {
		t.Errorf("gpu01 output %q", got)
	}
	if m := srunTaskErr.FindStringSubmatch("srun: error: gpu03: task 2: Exited with exit code 2"); m == nil || m[1] != "gpu03" {
		t.Errorf("srun error not parsed: %v", m)
	}
}

func TestPDSHDemux(t *testing.T) {
	p := &PDSH{ssh: &SSH{opts: Options{Fanout: 4, ConnectTimeout: 3 * time.Second}}}
	ph := phase{out: map[string]*bytes.Buffer{}, err: map[string]*bytes.Buffer{}, exit: map[string]int{}, timedOut: map[string]bool{}}
	for _, h := range []string{"n1", "n2", "n3"} {
		ph.out[h], ph.err[h] = &bytes.Buffer{}, &bytes.Buffer{}
	}
	demux([]byte("n1: {\nn2: "+markDate+" 1\nn1: }\n"), ph.out, nil)
	stderr := "n2: ssh: connect to host 10.0.0.2 port 22: Connection refused\npdsh@vm: n2: ssh exited with exit code 255\npdsh@vm: n3: command timeout\n"
	ph.readStderr([]byte(stderr))
	if ph.out["n1"].String() != "{\n}\n" || ph.exit["n2"] != 255 || !ph.timedOut["n3"] || !strings.Contains(ph.err["n2"].String(), "Connection refused") {
		t.Errorf("demux: out %q exit %v timeout %v err %q", ph.out["n1"], ph.exit, ph.timedOut, ph.err["n2"])
	}
	args := strings.Join(p.pdshArgs([]string{"n1", "n2"}, 30*time.Second, "echo hi"), " ")
	if args != "-R ssh -S -f 4 -t 3 -u 30 -w n1,n2 sh -c 'echo hi'" {
		t.Errorf("pdsh args %s", args)
	}
}

// goodReport is a minimal report --from-json accepts.
const goodReport = `{"schema":1,"tool":"ncclwiz","version":"t","generated_at":"2026-01-01T00:00:00Z","host":{"name":"x","kind":"local","shm_dir":"/dev/shm","uid":0,"euid":0,"simulated":false},"summary":{},"checks":[],"findings":[]}`

func TestFromJSON(t *testing.T) {
	dir := t.TempDir()
	good := goodReport
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "gpu01.json"), []byte(good), 0o600))
	must(os.WriteFile(filepath.Join(dir, "gpu02.json"), []byte(`{"schema":7}`), 0o600))
	must(os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600))
	must(os.Symlink("/etc/passwd", filepath.Join(dir, "gpu03.json")))
	out, err := FromJSON(context.Background(), dir)
	must(err)
	got := map[string]string{}
	for _, n := range out.Nodes {
		got[n.Name] = string(n.Status) + "/" + n.Reason
	}
	want := map[string]string{"gpu01": "ok/", "gpu02": "failed/bad-report", "gpu03": "failed/bad-report"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	if len(got) != 3 {
		t.Errorf("nodes %v", got)
	}
	if _, err := FromJSON(context.Background(), t.TempDir()); err == nil {
		t.Error("empty dir: no error")
	}
}

// TestSSHEngineUnreachableFast runs the real ssh client against a closed
// port on loopback: the node is a finding (refused), not an error.
func TestSSHEngineUnreachable(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("ssh client not installed")
	}
	cfg := filepath.Join(t.TempDir(), "cfg")
	if err := os.WriteFile(cfg, []byte("Host closed\n  HostName 127.0.0.1\n  Port 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	eng, err := NewSSH(Options{SSHConfig: cfg, ConnectTimeout: 3 * time.Second, NodeTimeout: 20 * time.Second, LocalBinary: exe})
	if err != nil {
		t.Fatal(err)
	}
	out, err := eng.Run(context.Background(), []string{"closed"})
	if err != nil {
		t.Fatal(err)
	}
	if n := out.Nodes[0]; n.Status != cluster.StatusUnreachable || n.Reason != "refused" {
		t.Errorf("%+v", n)
	}
}

// readFromJSON is `ncclwiz cluster check --from-json DIR` for the report
// DIR/gpu01.json: nil when it was read as a report, else why not.
func readFromJSON(ctx context.Context, p string) error {
	out, err := FromJSON(ctx, filepath.Dir(p))
	if err != nil {
		return err
	}
	for _, n := range out.Nodes {
		if n.Name == "gpu01" {
			if n.Status == cluster.StatusOK {
				return nil
			}
			return errors.New(n.Error)
		}
	}
	return errors.New("gpu01 was not read at all")
}

// TestHostileReports (issue 22 item 10): --from-json against every
// hostile input, among them a report a loop swaps for a FIFO (which hung
// ncclwiz in fifo_open, deaf to SIGTERM, for 14 minutes).
func TestHostileReports(t *testing.T) {
	hostiletest.Suite(t, "from-json", func(t *testing.T) string { return t.TempDir() }, "gpu01.json", []byte(goodReport), true)
}
