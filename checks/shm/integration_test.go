package shm

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/shmtest"
)

func TestMain(m *testing.M) {
	shmtest.Main()
	os.Exit(m.Run())
}

func TestRealTmpfsHoldersAndFull(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "1M")
	held := shmtest.MakeSegment(t, dir, "nccl-Held01", 64<<10, time.Hour)
	mapped := shmtest.MakeSegment(t, dir, "nccl-Mapd02", 64<<10, time.Hour)
	for _, n := range []string{"nccl-Orph03", "nccl-Orph04", "nccl-Orph05"} {
		shmtest.MakeSegment(t, dir, n, 64<<10, time.Hour)
	}
	shmtest.Start(t, "open", held)
	shmtest.Start(t, "map", mapped)

	h := host.Local(host.LocalOptions{ShmDir: dir, NoNVML: true})
	inv, err := Scan(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	got := states(inv)
	want := map[string]State{"nccl-Held01": InUse, "nccl-Mapd02": InUse, "nccl-Orph03": Orphaned, "nccl-Orph04": Orphaned, "nccl-Orph05": Orphaned}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	for _, s := range inv.Segments {
		if s.Name == "nccl-Mapd02" && (len(s.Holders) == 0 || s.Holders[0].Via != "map") {
			t.Errorf("mapped segment holders = %+v (want via map)", s.Holders)
		}
		if s.Name == "nccl-Held01" && (len(s.Holders) == 0 || s.Holders[0].Via != "fd") {
			t.Errorf("open segment holders = %+v (want via fd)", s.Holders)
		}
	}
	for _, s := range inv.Segments {
		if s.State == Orphaned {
			ok, hs, err := ProveOrphaned(context.Background(), h, s)
			if !ok || err != nil {
				t.Errorf("ProveOrphaned(%s) = %v %v %v", s.Name, ok, hs, err)
			}
		}
		if s.State == InUse {
			if ok, _, _ := ProveOrphaned(context.Background(), h, s); ok {
				t.Errorf("in-use %s proven orphaned", s.Name)
			}
		}
	}

	// Fill the tmpfs: shm.mount must call it full.
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break // ENOSPC
		}
	}
	f.Close()
	fs, err := runMount(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if !has(fs, checks.Error, "is full") {
		t.Errorf("full tmpfs not reported:\n%s", titles(fs))
	}
	if fs[0].Evidence["size_option"] != "1M" && fs[0].Evidence["size_option"] != "1024k" {
		t.Errorf("size option = %v", fs[0].Evidence["size_option"])
	}
}
