package ras

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/rastest"
)

func fakeServer(t *testing.T, status string, json bool, greeting string) string {
	t.Helper()
	return rastest.Serve(t, rastest.Server{Status: func() string { return status }, JSON: json, Greeting: greeting})
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestQueryVersions(t *testing.T) {
	cases := []struct {
		name, file  string
		json        bool
		format, ver string
		missing     []int // ranks RAS says are missing (-1: a whole process)
		dead        int
		behind      []int
	}{
		{name: "2.26 text, op-count mismatch", file: "status-2.26-mismatch.txt", format: "text", ver: "2.26.2+cuda12.8", behind: []int{2}},
		{name: "2.24 text, dead process", file: "status-2.24-dead.txt", format: "text", ver: "2.24.3+cuda12.6", missing: []int{-1, 5}, dead: 1},
		{name: "2.27 text, missing rank and a rank behind", file: "status-2.27-incomplete.txt", format: "text", ver: "2.27.7+cuda12.9", missing: []int{6}, behind: []int{3}},
		{name: "2.28.9 JSON, unresponsive rank", file: "status-2.28.9.json", json: true, format: "json", ver: "2.28.9", missing: []int{1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakeServer(t, read(t, tc.file), tc.json, "")
			r, err := Query(context.Background(), addr, Options{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if r.Format != tc.format || r.NCCLVersion != tc.ver || r.Comms != 1 {
				t.Fatalf("format %q version %q comms %d", r.Format, r.NCCLVersion, r.Comms)
			}
			var missing []int
			for _, p := range r.Missing {
				missing = append(missing, p.Rank)
			}
			if fmt.Sprint(missing) != fmt.Sprint(tc.missing) && !(len(missing) == 0 && len(tc.missing) == 0) {
				t.Errorf("missing %v, want %v", missing, tc.missing)
			}
			if len(r.Dead) != tc.dead {
				t.Errorf("dead %+v, want %d", r.Dead, tc.dead)
			}
			var behind []int
			for _, rc := range r.Lagging() {
				behind = append(behind, rc.Rank)
			}
			if fmt.Sprint(behind) != fmt.Sprint(tc.behind) && !(len(behind) == 0 && len(tc.behind) == 0) {
				t.Errorf("behind %v, want %v (%+v)", behind, tc.behind, r.Mismatches)
			}
			if r.Raw == "" {
				t.Error("raw reply not kept")
			}
		})
	}
}

func TestQueryFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	cases := []struct {
		name, addr string
		want       error
	}{
		{name: "closed port", addr: closed, want: ErrClosed},
		{name: "speaks HTTP", addr: fakeServer(t, "", false, "HTTP/1.1 400 Bad Request\r\n\r\n"), want: ErrNotRAS},
		{name: "binary garbage", addr: fakeServer(t, "", false, "\x00\x01\xff\x1b[2J\n"), want: ErrNotRAS},
		{name: "status is not a report", addr: fakeServer(t, "hello there\n", false, ""), want: ErrNotRAS},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Query(context.Background(), tc.addr, Options{Timeout: 5 * time.Second})
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"status-2.26-mismatch.txt", "status-2.24-dead.txt", "status-2.27-incomplete.txt", "status-2.28.9.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err == nil {
			_ = r.Lagging()
		}
	})
}
