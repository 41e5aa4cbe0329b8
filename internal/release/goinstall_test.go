package release

import (
	"archive/zip"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/gobin"
)

const modulePath = "github.com/ncclwiz/ncclwiz"

// moduleProxy lays this checkout out as a module proxy would serve it
// (GOPROXY=file://…): one version of the module, zipped from the files git
// tracks, as the real proxy zips a commit. The version is new each run, so
// the shared module cache never hands back an older zip; what the go
// command puts in that cache for it is removed at the end.
func moduleProxy(t *testing.T) (string, string) {
	t.Helper()
	root := gobin.ModuleRoot()
	ls, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (the proxy is built from a git checkout)", err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	version := "v0.0.0-" + time.Now().UTC().Format("20060102150405") + "-" + hex.EncodeToString(rnd[:])
	t.Cleanup(func() { forgetVersion(version) })
	proxy := t.TempDir()
	dir := filepath.Join(proxy, modulePath, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, name := range strings.Split(strings.TrimRight(string(ls), "\x00"), "\x00") {
		fi, err := os.Lstat(filepath.Join(root, name))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a symlink (module zips hold regular files)
		}
		w, err := zw.Create(modulePath + "@" + version + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		r, err := os.Open(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(w, r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info := `{"Version":"` + version + `","Time":"` + time.Now().UTC().Format(time.RFC3339) + `"}`
	for name, body := range map[string]string{"list": version + "\n", version + ".mod": string(mod), version + ".info": info} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return proxy, version
}

// forgetVersion removes what the go command cached for a test version.
func forgetVersion(version string) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return
	}
	cache := strings.TrimSpace(string(out))
	extracted := filepath.Join(cache, modulePath+"@"+version)
	_ = filepath.Walk(extracted, func(p string, _ os.FileInfo, _ error) error { _ = os.Chmod(p, 0o755); return nil })
	_ = os.RemoveAll(extracted)
	for _, ext := range []string{".zip", ".ziphash", ".mod", ".info", ".lock"} {
		_ = os.Remove(filepath.Join(cache, "cache", "download", modulePath, "@v", version+ext))
	}
}

func goEnv(proxy string) []string {
	upstream := os.Getenv("GOPROXY")
	if upstream == "" {
		upstream = "https://proxy.golang.org,direct"
	}
	return append(os.Environ(), "GOPROXY=file://"+proxy+","+upstream, "GONOSUMDB="+modulePath, "GOFLAGS=", "GO111MODULE=on")
}

// TestModuleZipIsValid: the go command accepts this module as the proxy
// would serve it (a ':' in a testdata file name once made every version
// unusable: "malformed file path … invalid char ':'").
func TestModuleZipIsValid(t *testing.T) {
	proxy, version := moduleProxy(t)
	cmd := exec.Command("go", "mod", "download", "-json", modulePath+"@"+version)
	cmd.Dir = t.TempDir()
	cmd.Env = append(goEnv(proxy), "GOMODCACHE="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var res struct{ Error, Dir string }
	_ = json.Unmarshal(out, &res)
	if err != nil || res.Error != "" || res.Dir == "" {
		t.Fatalf("go mod download: %v %s\n%s", err, res.Error, out)
	}
	// The module cache is read-only; let t.TempDir remove it.
	_ = filepath.Walk(filepath.Dir(res.Dir), func(p string, _ os.FileInfo, _ error) error { _ = os.Chmod(p, 0o755); return nil })
}

// TestGoInstall runs README's route, `go install github.com/ncclwiz/ncclwiz@latest`,
// against that proxy and starts the result. It builds the whole module, so
// it runs where the release artifacts are checked (NCCLWIZ_DIST, CI).
func TestGoInstall(t *testing.T) {
	needDist(t)
	proxy, version := moduleProxy(t)
	bin := t.TempDir()
	cmd := exec.Command("go", "install", modulePath+"@latest")
	cmd.Dir = t.TempDir()
	cmd.Env = append(goEnv(proxy), "GOBIN="+bin, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(bin, "ncclwiz"), "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ncclwiz "+version) {
		t.Fatalf("installed ncclwiz: %v %s", err, out)
	}
}
