package redact

import (
	"strings"
	"testing"
)

func TestRedactor(t *testing.T) {
	r := New()
	r.AddHost("gpu-node-17.cluster.example.org")
	r.AddUser("alice")
	r.AddHome("/home/alice")
	in := strings.Join([]string{
		"gpu-node-17:12345:12400 [0] NCCL INFO Bootstrap : Using eth0:10.1.2.3<0>",
		"socketPollConnect: connect to 10.1.2.4<51234> returned Connection refused",
		"peer gpu-node-17.cluster.example.org at 10.1.2.3 again",
		"file /home/alice/train.py by alice, channel 3, NCCL version 2.21.5+cuda12.4",
		"loopback 127.0.0.1 and ::1 stay; 2001:db8::42 goes",
		"NCCL INFO NET/Socket : Using [0]eth0:fe80::a00:27ff:fe4e:66a1%eth0<0> [1]ib0:fe80::1",
		"at 12:34:56 mac 0c:42:a1:00:11:22 node-x:1234:5678 again fe80::a00:27ff:fe4e:66a1",
		"HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz1234",
	}, "\n")
	out := r.Text(in)
	for _, leaked := range []string{"gpu-node-17", "10.1.2.3", "10.1.2.4", "alice", "2001:db8::42", "hf_abc", "fe80", "27ff:fe4e"} {
		if strings.Contains(out, leaked) {
			t.Errorf("%q leaked:\n%s", leaked, out)
		}
	}
	for _, kept := range []string{"node-A:12345:12400", "ip-1<0>", "ip-2<51234>", "at ip-1 again", "~/train.py", "by user-1", "channel 3", "2.21.5+cuda12.4", "127.0.0.1", "::1 stay",
		"[0]eth0:ip-4%eth0<0> [1]ib0:ip-5", "at 12:34:56 mac 0c:42:a1:00:11:22 node-x:1234:5678 again ip-4"} {
		if !strings.Contains(out, kept) {
			t.Errorf("want %q in:\n%s", kept, out)
		}
	}
	m := r.Mapping()
	if m["node-A"] != "gpu-node-17.cluster.example.org" || m["ip-1"] != "10.1.2.3" || m["user-1"] != "alice" {
		t.Errorf("mapping = %v", m)
	}
}

func TestLetters(t *testing.T) {
	for i, want := range map[int]string{0: "A", 25: "Z", 26: "AA", 27: "AB"} {
		if got := letters(i); got != want {
			t.Errorf("letters(%d) = %s, want %s", i, got, want)
		}
	}
}
