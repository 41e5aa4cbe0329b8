package contain

import "github.com/ncclwiz/ncclwiz/internal/ownedtmp"

// A run's temporary directory records its owner (internal/ownedtmp). The
// keeper removes the directory if ncclwiz dies during a launch; between
// launches (judging a rung, explaining its log) no keeper runs, and a
// SIGKILL there leaves it behind: the next run's SweepTmp removes it.

// ClaimTmp records this process as the owner of dir.
func ClaimTmp(dir string) error { return ownedtmp.Claim(dir) }

// SweepTmp removes the run directories (TmpPrefix*) in parent that this
// user owns and whose owner process is provably gone (ownedtmp.Sweep).
func SweepTmp(parent string) []string { return ownedtmp.Sweep(parent, TmpPrefix) }
