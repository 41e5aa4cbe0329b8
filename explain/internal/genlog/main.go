// Command genlog writes a synthetic NCCL_DEBUG=INFO log for the explain
// benchmark, and the explainer's signature patterns for ripgrep (Go syntax
// under (?-u)) or rewritten for grep -E, so scripts/bench-explain-vs-rg.sh
// compares like with like.
//
//	go run ./explain/internal/genlog -realistic -size 128MB -o /tmp/job.log -rg-patterns /tmp/rg.txt
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/explain"
	"github.com/ncclwiz/ncclwiz/explain/internal/loggen"
)

func main() {
	size := flag.String("size", "256MiB", "approximate size of the log (B, KiB, MiB, GiB; KB/MB/GB are decimal)")
	out := flag.String("o", "", "write the log to this file (required)")
	patterns := flag.String("patterns", "", "also write the signature patterns as grep -E patterns to this file")
	seed := flag.Uint64("seed", 1, "random seed")
	rgPatterns := flag.String("rg-patterns", "", "also write the signature patterns as ripgrep patterns (Go syntax under (?-u)) to this file")
	realistic := flag.Bool("realistic", false, "the 2-node 16-rank job (torchrun prefixes, interleaved ranks, GRAPH/NET lines, tqdm bars)")
	initHeavy := flag.Bool("init-heavy", false, "the same job's communicator set-up under NCCL_DEBUG_SUBSYS=ALL: nearly all INFO init/topology/graph/ENV/connection lines")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "genlog: -o FILE is required")
		os.Exit(2)
	}
	n, err := parseSize(*size)
	if err != nil {
		fmt.Fprintln(os.Stderr, "genlog:", err)
		os.Exit(2)
	}
	if err := run(*out, *patterns, *rgPatterns, loggen.Options{Size: n, Seed: *seed, Realistic: *realistic, InitHeavy: *initHeavy}); err != nil {
		fmt.Fprintln(os.Stderr, "genlog:", err)
		os.Exit(1)
	}
}

func run(out, patterns, rgPatterns string, o loggen.Options) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := loggen.Generate(f, o); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if patterns == "" && rgPatterns == "" {
		return nil
	}
	e, err := explain.New(explain.Options{})
	if err != nil {
		return err
	}
	if rgPatterns != "" {
		// ripgrep's regex crate reads RE2 syntax as Go writes it; (?-u)
		// makes \d, \w and case folding ASCII, as the issue measured.
		var b strings.Builder
		for _, p := range e.Patterns() {
			b.WriteString("(?-u)" + p + "\n")
		}
		if err := os.WriteFile(rgPatterns, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	if patterns == "" {
		return nil
	}
	var b strings.Builder
	for _, p := range e.Patterns() {
		ere, err := loggen.ERE(p)
		if err != nil {
			return err
		}
		b.WriteString(ere + "\n")
	}
	return os.WriteFile(patterns, []byte(b.String()), 0o644)
}

func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			n, err := strconv.ParseFloat(strings.TrimSuffix(s, u.suffix), 64)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("bad size %q", s)
			}
			return int64(n * float64(u.mult)), nil
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q (e.g. 256MiB)", s)
	}
	return n, nil
}
