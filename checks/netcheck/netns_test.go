package netcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/gobin"
)

// This test builds the real ncclwiz binary and runs it inside a fresh
// network namespace laid out like a GPU server with docker and libvirt:
//
//	ns (the server)                        ns-peer (a container and the switch)
//	  lo
//	  docker0  172.17.0.1/16  bridge ─ vethc0a1 ══ ceth0 172.17.0.2/16
//	  virbr0   192.168.122.1/24  bridge without ports, as libvirt leaves it
//	  eth0     10.23.0.5/24, default route via 10.23.0.1
//	           (a dummy where the kernel has the dummy driver, else a veth ══ sw0 10.23.0.1/24)
//
// and checks what `ncclwiz check --only net.interfaces --json` says about
// several NCCL_SOCKET_IFNAME values.

type jsonReport struct {
	Findings []struct {
		Check    string         `json:"check"`
		Severity string         `json:"severity"`
		Title    string         `json:"title"`
		Detail   string         `json:"detail"`
		Evidence map[string]any `json:"evidence"`
	} `json:"findings"`
}

func TestNetnsInterfaceRecommendation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces (CI runs this as root)")
	}
	ipPath, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("iproute2's ip command is not installed")
	}
	bin := buildNcclwiz(t)

	ns := fmt.Sprintf("ncclwiz-test-%d", os.Getpid())
	peer := ns + "-peer"
	ip := func(args ...string) error {
		out, err := exec.Command(ipPath, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	must := func(args ...string) {
		t.Helper()
		if err := ip(args...); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{ns, peer} {
		must("netns", "add", n)
		n := n
		t.Cleanup(func() {
			if err := ip("netns", "del", n); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	must("-n", ns, "link", "set", "lo", "up")
	must("-n", ns, "link", "add", "docker0", "type", "bridge")
	must("-n", ns, "addr", "add", "172.17.0.1/16", "dev", "docker0")
	must("-n", ns, "link", "add", "vethc0a1", "type", "veth", "peer", "name", "ceth0", "netns", peer)
	must("-n", ns, "link", "set", "vethc0a1", "master", "docker0")
	must("-n", ns, "link", "set", "vethc0a1", "up")
	must("-n", ns, "link", "set", "docker0", "up")
	must("-n", peer, "addr", "add", "172.17.0.2/16", "dev", "ceth0")
	must("-n", peer, "link", "set", "ceth0", "up")
	must("-n", ns, "link", "add", "virbr0", "type", "bridge")
	must("-n", ns, "addr", "add", "192.168.122.1/24", "dev", "virbr0")
	must("-n", ns, "link", "set", "virbr0", "up")
	eth0Kind := "dummy"
	if err := ip("-n", ns, "link", "add", "eth0", "type", "dummy"); err != nil {
		t.Logf("no dummy driver (%v); eth0 is a veth to a switch namespace instead", err)
		eth0Kind = "veth"
		must("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "sw0", "netns", peer)
		must("-n", peer, "addr", "add", "10.23.0.1/24", "dev", "sw0")
		must("-n", peer, "link", "set", "sw0", "up")
	}
	must("-n", ns, "addr", "add", "10.23.0.5/24", "dev", "eth0")
	must("-n", ns, "link", "set", "eth0", "up")
	must("-n", ns, "route", "add", "default", "via", "10.23.0.1", "dev", "eth0")
	waitLowerUp(t, ipPath, ns, "eth0")

	run := func(t *testing.T, env ...string) jsonReport {
		t.Helper()
		cmd := exec.Command(ipPath, "netns", "exec", ns, bin, "check", "--only", "net.interfaces", "--json")
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_COLOR=1"}, env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
			t.Fatalf("ncclwiz: %v\n%s\n%s", err, stderr.String(), stdout.String())
		}
		var r jsonReport
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			t.Fatalf("JSON: %v\n%s", err, stdout.String())
		}
		return r
	}
	find := func(t *testing.T, r jsonReport, sub string) (sev, title string, ev map[string]any) {
		t.Helper()
		var all []string
		for _, f := range r.Findings {
			if f.Check != "net.interfaces" {
				t.Errorf("finding of %s in --only net.interfaces", f.Check)
			}
			if strings.Contains(f.Title, sub) {
				return f.Severity, f.Title, f.Evidence
			}
			all = append(all, "["+f.Severity+"] "+f.Title)
		}
		t.Fatalf("no finding %q in:\n  %s", sub, strings.Join(all, "\n  "))
		return "", "", nil
	}
	recommended := func(t *testing.T, ev map[string]any) {
		t.Helper()
		rec, _ := ev["recommended_env"].(map[string]any)
		if rec["NCCL_SOCKET_IFNAME"] != "=eth0" || rec["GLOO_SOCKET_IFNAME"] != "eth0" {
			t.Errorf("recommended_env = %v, want NCCL_SOCKET_IFNAME==eth0 and GLOO_SOCKET_IFNAME=eth0", ev["recommended_env"])
		}
	}

	t.Run("inventory", func(t *testing.T) {
		r := run(t)
		_, _, ev := find(t, r, "interfaces; default route via eth0; best for NCCL: eth0")
		want := map[string]string{"lo": ClassLoopback, "docker0": ClassDocker, "vethc0a1": ClassVeth, "virbr0": ClassVirbr, "eth0": eth0Kind}
		for _, x := range ev["interfaces"].([]any) {
			e := x.(map[string]any)
			name := e["name"].(string)
			if want[name] != e["class"] {
				t.Errorf("%s: class %v, want %s", name, e["class"], want[name])
			}
			switch name {
			case "virbr0":
				// An empty bridge has no carrier on older kernels and has one on
				// newer ones; either way it is not a way to other machines.
				if !strings.Contains(fmt.Sprint(e["unsuitable"]), "a libvirt VM bridge") {
					t.Errorf("virbr0 not called unsuitable: %v", e)
				}
			case "vethc0a1":
				if e["master"] != "docker0" {
					t.Errorf("veth master %v", e["master"])
				}
			case "eth0":
				if e["default_route"] != true || !strings.Contains(fmt.Sprint(e["addrs"]), "10.23.0.5/24") {
					t.Errorf("eth0: %v", e)
				}
			}
		}
	})
	t.Run("unset", func(t *testing.T) {
		sev, title, ev := find(t, run(t), "NCCL_SOCKET_IFNAME is unset; NCCL's automatic choice includes")
		if sev != "info" || !strings.Contains(title, "virbr0") {
			t.Errorf("[%s] %s", sev, title)
		}
		if got := fmt.Sprint(ev["selected_before_2_28"]); !strings.Contains(got, "virbr0") {
			t.Errorf("NCCL < 2.28 would take the down virbr0 too: %s", got)
		}
		recommended(t, ev)
	})
	t.Run("unset, multi-node", func(t *testing.T) {
		sev, _, ev := find(t, run(t, "WORLD_SIZE=16", "LOCAL_WORLD_SIZE=8"), "NCCL's automatic choice includes")
		if sev != "warn" {
			t.Errorf("severity %s", sev)
		}
		recommended(t, ev)
	})
	for _, c := range []struct {
		value, env, title, sev string
		rec                    bool
	}{
		{"ens34", "", "NCCL_SOCKET_IFNAME=ens34 matches no interface with an address here", "error", true},
		{"docker", "", "docker0", "error", true},
		{"^docker,lo,veth", "", "NCCL_SOCKET_IFNAME=^docker,lo,veth also selects virbr0", "warn", true},
		{"=eth0", "", "NCCL_SOCKET_IFNAME==eth0 selects eth0 (10.23.0.5, UP,LOWER_UP", "ok", false},
		{"lo", "", "NCCL_SOCKET_IFNAME=lo selects loopback only", "warn", true},
		{"lo", "MASTER_ADDR=10.23.0.9", "NCCL_SOCKET_IFNAME=lo selects loopback, but the job spans machines", "error", true},
	} {
		t.Run(c.value+" "+c.env, func(t *testing.T) {
			env := []string{"NCCL_SOCKET_IFNAME=" + c.value}
			if c.env != "" {
				env = append(env, c.env, "MASTER_PORT=29500")
			}
			sev, title, ev := find(t, run(t, env...), c.title)
			if sev != c.sev {
				t.Errorf("[%s] %s: want %s", sev, title, c.sev)
			}
			if c.rec {
				recommended(t, ev)
			} else if ev["recommended_env"] != nil {
				t.Errorf("unexpected recommendation %v", ev["recommended_env"])
			}
		})
	}
}

// buildNcclwiz compiles the command once per test binary.
func buildNcclwiz(t *testing.T) string {
	t.Helper()
	return gobin.Ncclwiz(t, false)
}

// waitLowerUp waits (bounded) for carrier on an interface of ns.
func waitLowerUp(t *testing.T, ipPath, ns, dev string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		out, _ := exec.Command(ipPath, "-n", ns, "link", "show", dev).Output()
		if strings.Contains(string(out), "LOWER_UP") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s in %s never got carrier", dev, ns)
}
