package flightrec

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/hostiletest"
)

func TestMain(m *testing.M) {
	hostiletest.Main(map[string]hostiletest.Reader{"dumps": readDumps})
	os.Exit(m.Run())
}

// readDumps is `ncclwiz hang --dumps DIR/nccl_trace_rank_` for the file
// DIR/nccl_trace_rank_0: nil when it was read as a dump, else why not.
func readDumps(ctx context.Context, p string) error {
	f := Find(ctx, host.Local(host.LocalOptions{NoNVML: true}), "", strings.TrimSuffix(p, "0"), time.Time{})
	if len(f.Dumps) == 1 {
		return nil
	}
	if len(f.Skipped) > 0 {
		return errors.New(strings.Join(f.Skipped, "; "))
	}
	return errors.New("no dump")
}

// TestHostileDumps (issue 22 item 10): the dump reader against every
// hostile input, in a child that is killed if it hangs or grows.
func TestHostileDumps(t *testing.T) {
	valid, err := os.ReadFile("testdata/seed-desync-rank2.pickle")
	if err != nil {
		t.Fatal(err)
	}
	hostiletest.Suite(t, "dumps", func(t *testing.T) string { return t.TempDir() }, "nccl_trace_rank_0", valid, true)
}

// pickleBuilder writes protocol-2 pickles by opcode, for bombs Python
// would refuse to build or take long to.
type pickleBuilder struct{ bytes.Buffer }

func (p *pickleBuilder) str(s string) {
	p.WriteByte('X')
	_ = binary.Write(&p.Buffer, binary.LittleEndian, uint32(len(s)))
	p.WriteString(s)
}

// dump wraps value (opcodes that push one value) as {"version": "2.10",
// "entries": value}.
func dump(value func(p *pickleBuilder)) []byte {
	var p pickleBuilder
	p.Write([]byte{0x80, 2, '}', '('})
	p.str("version")
	p.str("2.10")
	p.str("entries")
	value(&p)
	p.Write([]byte{'u', '.'})
	return p.Bytes()
}

// dagList is a=[]; a=[a,a] n times: n*5 bytes, 2^n leaves once expanded.
func dagList(n int) func(p *pickleBuilder) {
	return func(p *pickleBuilder) {
		p.Write([]byte{']', 'q', 0})
		for range n {
			p.Write([]byte{'0', ']', '(', 'h', 0, 'h', 0, 'e', 'q', 0})
		}
	}
}

// bombs are the pickle and JSON shapes that cost little to write and much
// to expand.
func bombs() map[string][]byte {
	// A list of entries that all share one dict whose input_sizes is
	// 1 MiB of text: 4096 entries, 4 GiB of signatures once rendered.
	var shared pickleBuilder
	shared.Write([]byte{'}', '('})
	shared.str("profiling_name")
	shared.str("nccl:all_reduce")
	shared.str("input_sizes")
	shared.str(strings.Repeat("9", 1<<20))
	shared.Write([]byte{'u', 'q', 1})
	entries := func(p *pickleBuilder) {
		p.Write([]byte{']', '('})
		p.Write(shared.Bytes())
		for range 4095 {
			p.Write([]byte{'h', 1})
		}
		p.WriteByte('e')
	}
	flat := func(p *pickleBuilder) { // 20 M Nones: a big list from a 20 MB pickle
		p.Write([]byte{']', '('})
		p.Write(bytes.Repeat([]byte{'N'}, 20_000_000))
		p.WriteByte('e')
	}
	self := func(p *pickleBuilder) { p.Write([]byte{']', 'q', 0, 'h', 0, 'a'}) } // a.append(a)
	var js bytes.Buffer
	js.WriteString(`{"version": "2.10", "entries": [`)
	js.WriteString(strings.Repeat(`{},`, 10_000_000))
	js.WriteString(`{}]}`)
	var sizes bytes.Buffer
	sizes.WriteString(`{"version": "2.10", "entries": [{"profiling_name": "nccl:all_reduce", "input_sizes": [`)
	sizes.WriteString(strings.Repeat(`0,`, 12_000_000))
	sizes.WriteString(`0]}]}`)
	return map[string][]byte{
		"list DAG a=[a,a] x31":         dump(dagList(31)),
		"shared 1 MiB string x4096":    dump(entries),
		"20 M Nones":                   dump(flat),
		"list containing itself":       dump(self),
		"JSON with 10 M empty entries": js.Bytes(),
		"JSON with 12 M-element sizes": sizes.Bytes(),
	}
}

// TestDumpBombs (issue 22 item 9): a 160-byte pickle whose values share
// references (a=[a,a] 31 times: 2^31 values once expanded) grew ncclwiz to
// 24 GB. Each bomb is read in a child that is killed past 512 MiB; each
// must be refused with a reason, quickly.
func TestDumpBombs(t *testing.T) {
	for name, b := range bombs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(t.TempDir(), "nccl_trace_rank_0")
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			r := hostiletest.Attack(t, "dumps", p, 1)
			msg := strings.Join(r.Errors, "; ")
			if r.OK != 0 || !strings.Contains(msg, "not a flight-recorder dump") {
				t.Errorf("%d bytes: %+v", len(b), r)
			}
			t.Logf("%d bytes: %s", len(b), msg)
		})
	}
}
