package textsafe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRedactSecretShapes is the table of secret shapes every output of
// ncclwiz relies on (report, check --json/-v, fix previews, exported
// scripts, explain). Each secret must vanish; the text around it stays.
func TestRedactSecretShapes(t *testing.T) {
	tests := []struct {
		name, in, secret, want string
	}{
		{"url user and password", "MY_URL=https://bob:hunter2@example.com/x", "hunter2", "https://bob:" + Redacted + "@example.com/x"},
		{"url empty user", "NCCL_NET=redis://:pass@host:6379", ":pass@", "redis://:" + Redacted + "@host:6379"},
		{"url empty user in log", "connect to https://:pw@store.example.com/v1 failed", ":pw@", "https://:" + Redacted + "@store.example.com"},
		{"url password with @", "s3://AKID:p@ss@bucket/x", "p@ss", "s3://AKID:" + Redacted + "@bucket/x"},
		{"key=value", "train --password=hunter2 --lr 1", "hunter2", "--password=" + Redacted + " --lr 1"},
		{"--flag value token", "python train.py --hf_token abc123 --lr 1", "abc123", "--hf_token " + Redacted + " --lr 1"},
		{"--flag value aws secret", "train.py --aws_secret_access_key wJalrXUtnFEMI --x 1", "wJalrXUtnFEMI", "--aws_secret_access_key " + Redacted},
		{"--pw short value", "run --pw X --epochs 3", " X ", "--pw " + Redacted + " --epochs 3"},
		{"--flag=value dash", "run --api-key=0123abcd", "0123abcd", "--api-key=" + Redacted},
		{"-flag value", "tool -password s3cret", "s3cret", "-password " + Redacted},
		{"flag after boolean auth flag", "run --no-auth --token abc", "abc", "--no-auth --token " + Redacted},
		{"nested assign", "args=--token=abc", "abc", "args=--token=" + Redacted},
		{"upper case flag", "run --HF-TOKEN abc", "abc", "--HF-TOKEN " + Redacted},
		{"credential", "run --credentials /tmp/c.json", "/tmp/c.json", "--credentials " + Redacted},
		{"passwd", "passwd: hunter2", "hunter2", "passwd: " + Redacted},
		{"auth", "auth=letmein", "letmein", "auth=" + Redacted},
		{"quoted value", `run --secret "a b c" --x 1`, "a b c", "--secret " + Redacted + " --x 1"},
		{"dotted name", "spring.datasource.password=hunter2", "hunter2", "spring.datasource.password=" + Redacted},
		{"json pair", `{"api_key": "zzz999", "rank": 0}`, "zzz999", `"api_key": ` + Redacted + `, "rank": 0`},
		{"env secret", "WANDB_API_KEY=0123456789abcdef", "0123456789abcdef", "WANDB_API_KEY=" + Redacted},
		{"env glued", "DBPASSWORD=hunter2", "hunter2", "DBPASSWORD=" + Redacted},
		{"env space", "AWS_SECRET_ACCESS_KEY wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI", "AWS_SECRET_ACCESS_KEY " + Redacted},
		{"bearer header", "Authorization: Bearer abc.def-ghi_jkl", "abc.def", "Authorization: Bearer " + Redacted},
		{"basic header", "Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", "Authorization: Basic " + Redacted},
		{"header without scheme", "authorization=opaque-credential-1", "opaque-credential-1", "authorization=" + Redacted},
		{"bare bearer", "curl -H 'x: Bearer sometoken123456'", "sometoken123456", "Bearer " + Redacted},
		{"aws key id", "AccessKeyId AKIAIOSFODNN7EXAMPLE used", "AKIAIOSFODNN7EXAMPLE", "AccessKeyId " + Redacted + " used"},
		{"hf token", "token hf_abcdefghijklmnopqrstuvwxyz12 in text", "hf_abc", Redacted + " in text"},
		{"github classic", "ghp_0123456789abcdefghijklmnop", "ghp_", Redacted},
		{"github fine-grained", "pushed with github_pat_11ABCDEFG0123456789_abcdefghijkl", "github_pat_", "pushed with " + Redacted},
		{"jwt", "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U ok", "eyJhbGci", Redacted + " ok"},
		{"private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----\nnext", "MIIEpAIBAAKCAQEA7", "-----BEGIN RSA PRIVATE KEY-----" + Redacted + "-----END RSA PRIVATE KEY-----\nnext"},
		{"private key cut", "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXk", "b3BlbnNzaC1rZXk", "-----BEGIN OPENSSH PRIVATE KEY-----" + Redacted},
		{"slack", "hook xoxb-1234567890-abcdefghij", "xoxb-1234567890", "hook " + Redacted},
		// Issue 22 item 15: two shapes that leaked through report.md, check
		// --json and check -v.
		{"user:password@host without a scheme", "PROXY=alice:Passw0rd@proxy.example.com:3128", "Passw0rd", "alice:" + Redacted + "@proxy.example.com:3128"},
		{"user:password@ip in a command line", "train.py --store admin:Hunter22@10.0.0.5:1234 --lr 1", "Hunter22", "admin:" + Redacted + "@10.0.0.5:1234 --lr 1"},
		{"user:password@host at the start", "bob:s3cr3t@db:5432", "s3cr3t", "bob:" + Redacted + "@db:5432"},
		// A colon is allowed in a password (RFC 3986 userinfo; the URL
		// form above redacts it whole): it must not leave the rest bare.
		{"user:password@host, a colon in the password", "HTTPS_PROXY=bob:Pa:ss99@proxy:3128", "ss99", "bob:" + Redacted + "@proxy:3128"},
		{"bare AWS secret key", "loaded wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY from env", "wJalrXUtnFEMI", "loaded " + Redacted + " from env"},
		{"bare AWS secret key with +", "ey9Zt+Qw3ErTy8UiOpAsDfGhJkLzXcVbNm123456 end", "Qw3ErTy8", Redacted + " end"},
		{"bare key with a random value", "api key: 3fa9c1d2e8b7a6f5 loaded", "3fa9c1d2e8b7a6f5", "key: " + Redacted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RedactText(tt.in)
			if strings.Contains(got, tt.secret) {
				t.Errorf("RedactText(%q) = %q: %q leaked", tt.in, got, tt.secret)
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("RedactText(%q) = %q, want it to contain %q", tt.in, got, tt.want)
			}
			if again := RedactText(got); again != got {
				t.Errorf("not idempotent: %q then %q", got, again)
			}
		})
	}
}

// TestRedactLeavesOrdinaryText: what the redactor must not touch, or a
// report and explain's evidence lose their meaning.
func TestRedactLeavesOrdinaryText(t *testing.T) {
	for _, s := range []string{
		"NCCL_SOCKET_IFNAME=eth0",
		"torchrun --master_port 29500 --nproc_per_node 8 train.py",
		"RANK=0 LOCAL_RANK=0 WORLD_SIZE=8",
		"Waiting in store based barrier to initialize process group for rank: 1, key: store_based_barrier_key:1 (world_size=2)",
		"/home/alice/keys/model.pt and /etc/ssl/private",
		"gpu-node-17.cluster.example.org:29500",
		"NCCL INFO NCCL_IB_HCA set by environment to mlx5_0:1",
		"NCCL INFO Bootstrap : Using eth0:10.1.2.3<0>",
		"HF_TOKEN not set, downloading anonymously",
		"TOKENIZERS_PARALLELISM=false",
		"PWD=/home/alice/project",
		"python train.py --max_tokens 100 --tokenizer gpt2 --keyfile-dir /x",
		"Basic configuration loaded",
		"monkey=3 keyboard=us",
		"fe80::1%eth0 and 12:34:56",
		"Wait timeout for key(s): ['rank_1']",
		"https://example.com:443/path?x=1",
		"git@github.com:org/repo.git",
		"user@host:/data and ssh alice@gpu01",
		"torch 2.1.0 git a8e7c98cb95ff97bb30a728c6b2a1ce6bff946eb built",
		"/opt/conda/lib/python3/site/packages/torch/lib/libtorch.so",
		"AbstractProcessGroupNCCLWorkCollective1234",
		"[rank0]:[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500",
		"12:30 started, 13:45@node1 finished",
		"ncclwiz: /tmp/x/secret.log: permission denied",
		"ncclwiz: token.txt: no such file",
		"open /run/secrets/db_password: permission denied",
		"RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
	} {
		if got := RedactText(s); got != s {
			t.Errorf("RedactText(%q) = %q, want it unchanged", s, got)
		}
	}
}

func TestRedactEnv(t *testing.T) {
	tests := []struct{ name, value, want string }{
		{"HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz", Redacted},
		{"WANDB_API_KEY", "0123456789abcdef", Redacted},
		{"aws_secret_access_key", "x", Redacted},
		{"GH_PAT", "x", Redacted},
		{"MY_PASSWORD", "x", Redacted},
		{"NCCL_DEBUG", "INFO", "INFO"},
		{"NCCL_SOCKET_IFNAME", "eth0", "eth0"},
		{"AWS_REGION", "us-east-1", "us-east-1"},
		{"PWD", "/work", "/work"},
		{"NCCL_NET", "redis://:pass@host", "redis://:" + Redacted + "@host"},
		{"CMD", "train --password=hunter2 --lr 1", "train --password=" + Redacted + " --lr 1"},
		{"X", "ghp_0123456789abcdefghijklmnop", Redacted},
	}
	for _, tt := range tests {
		if got := RedactEnv(tt.name, tt.value); got != tt.want {
			t.Errorf("RedactEnv(%s, %q) = %q, want %q", tt.name, tt.value, got, tt.want)
		}
	}
}

func FuzzRedactText(f *testing.F) {
	f.Add("--hf_token X --pw Y redis://:p@h Authorization: Bearer abcdefgh")
	f.Add("args=--token=abc")
	f.Fuzz(func(t *testing.T, s string) {
		once := RedactText(s)
		if twice := RedactText(once); twice != once {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, once, twice)
		}
	})
}

// TestRedactKeepsExplainCorpus: none of the real-shaped job logs that
// explain's tests use has a secret, so redaction must not change a line
// of them (explain's evidence stays useful).
func TestRedactKeepsExplainCorpus(t *testing.T) {
	var files []string
	err := filepath.WalkDir("../../explain/testdata/corpus", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.HasSuffix(p, ".log") {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) < 40 {
		t.Fatalf("corpus: %d logs, %v", len(files), err)
	}
	lines := 0
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			lines++
			if got := RedactText(l); got != l {
				t.Errorf("%s: %q redacted to %q", filepath.Base(p), l, got)
			}
		}
	}
	t.Logf("%d lines of %d logs unchanged", lines, len(files))
}

// BenchmarkRedactText: a typical NCCL log line (nothing to redact) and a
// launcher command line with secrets.
func BenchmarkRedactText(b *testing.B) {
	for _, bc := range []struct{ name, s string }{
		{"log line", "gpu-node-17:12345:12400 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.2.3<0> [1]ib0:10.2.3.4<0>; NCCL_SOCKET_IFNAME set by environment to eth0"},
		{"cmdline", "python -u train.py --model llama --hf_token hf_abcdefghijklmnopqrstuvwxyz12 --lr 3e-4 --master_port 29500 --aws_secret_access_key wJalrXUtnFEMI/K7MDENG"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.s)))
			for b.Loop() {
				RedactText(bc.s)
			}
		})
	}
}
