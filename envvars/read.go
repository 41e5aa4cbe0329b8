package envvars

// sourceRead is one generated entry (read_gen.go): a name, the first and
// last NCCL release that reads it ("" for PyTorch's), and where.
type sourceRead struct {
	Name, First, Last, Source string
}

// Reader says which release range of which project reads a variable,
// according to the generated table (envvars/gen).
type Reader struct {
	Owner string // "nccl" or "torch"
	// First and Last release that read it (NCCL only).
	First, Last string
	// Current: the newest release scanned still reads it.
	Current bool
	Source  string
}

var readIndex = func() map[string]Reader {
	m := make(map[string]Reader, len(ncclReads)+len(torchReads))
	for _, r := range ncclReads {
		m[r.Name] = Reader{Owner: "nccl", First: r.First, Last: r.Last, Current: r.Last == ncclLastScanned,
			Source: "NVIDIA/nccl " + r.Source + " (v" + r.First + "–v" + r.Last + ")"}
	}
	for _, r := range torchReads {
		if _, ok := m[r.Name]; !ok {
			m[r.Name] = Reader{Owner: "torch", Current: true, Source: "pytorch " + r.Source}
		}
	}
	return m
}()

// ReadBySource reports whether some NCCL release, or PyTorch, reads name,
// according to the table generated from their sources.
func ReadBySource(name string) (Reader, bool) {
	r, ok := readIndex[name]
	return r, ok
}

// LatestNCCL is the newest NCCL release the generated table scanned.
func LatestNCCL() string { return ncclLastScanned }
