package envsnippet

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var sample = []Var{
	{Name: "NCCL_SOCKET_IFNAME", Value: "=eth0", Reason: "the default-route interface"},
	{Name: "NCCL_DEBUG", Value: "INFO", Reason: "log transports and errors of the next run"},
	{Name: "NCCL_IB_HCA", Value: "^=mlx5_1", Reason: "mlx5_1 ports are down"},
}

func TestRenderAllFormats(t *testing.T) {
	for _, f := range Formats {
		out, err := Render(f, sample)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, want := range []string{"NCCL_SOCKET_IFNAME", "NCCL_DEBUG", "NCCL_IB_HCA"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %s:\n%s", f, want, out)
			}
		}
	}
	got, _ := Render("bash", sample)
	if !strings.Contains(got, "export NCCL_IB_HCA=^=mlx5_1") || !strings.Contains(got, "export NCCL_SOCKET_IFNAME==eth0") {
		t.Errorf("bash:\n%s", got)
	}
	got, _ = Render("slurm", sample)
	if !strings.Contains(got, "#SBATCH --export=ALL,NCCL_DEBUG=INFO,NCCL_IB_HCA=^=mlx5_1,NCCL_SOCKET_IFNAME==eth0") {
		t.Errorf("slurm:\n%s", got)
	}
}

func TestRefusesInventedAndUnsafe(t *testing.T) {
	for _, v := range []Var{{Name: "NCCL_TIMEOUT", Value: "1800"}, {Name: "NCCL_SHM_DIR", Value: "/x"}, {Name: "NCCL_ASYNC_ERROR_HANDLING", Value: "1"}, {Name: "NCCL_DEBUG", Value: "INFO\nrm -rf /"}} {
		if _, err := Render("bash", []Var{v}); err == nil {
			t.Errorf("%s=%q accepted", v.Name, v.Value)
		}
	}
	if _, err := Render("slurm", []Var{{Name: "NCCL_SOCKET_IFNAME", Value: "eth0,ib0"}}); err == nil {
		t.Error("comma value accepted for --export")
	}
}

// The shell formats must evaluate to the exact values, whatever they hold.
func TestShellRoundTrip(t *testing.T) {
	vs := []Var{{Name: "NCCL_SOCKET_IFNAME", Value: `^docker,lo 'x' $HOME \`}}
	for _, shell := range []string{"bash", "fish"} {
		path, err := exec.LookPath(shell)
		if err != nil {
			continue
		}
		out, err := Render(shell, vs)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "env")
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := exec.Command(path, "-c", "source "+f+"; printf %s \"$NCCL_SOCKET_IFNAME\"").Output()
		if err != nil {
			t.Fatalf("%s: %v", shell, err)
		}
		if string(got) != vs[0].Value {
			t.Errorf("%s round trip = %q, want %q", shell, got, vs[0].Value)
		}
	}
	out, _ := Render("python", vs)
	py, err := exec.LookPath("python3")
	if err == nil {
		got, err := exec.Command(py, "-c", out+"\nimport sys; sys.stdout.write(os.environ['NCCL_SOCKET_IFNAME'])").Output()
		if err != nil || string(got) != vs[0].Value {
			t.Errorf("python round trip = %q %v", got, err)
		}
	}
}
