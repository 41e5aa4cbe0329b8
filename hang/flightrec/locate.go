package flightrec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/saferead"
)

// DefaultPrefix is where PyTorch writes dumps when no variable names a
// place (DebugInfoWriter::getWriter).
const DefaultPrefix = "/tmp/nccl_trace_rank_"

// Prefix returns the dump prefix a rank's environment sets: the newer
// TORCH_FR_DUMP_TEMP_FILE first, then TORCH_NCCL_DEBUG_INFO_TEMP_FILE.
func Prefix(env map[string]string) (prefix, from string) {
	for _, k := range []string{"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"} {
		if v := env[k]; v != "" {
			return v, k
		}
	}
	return DefaultPrefix, "default"
}

// Found is the result of looking for a job's dumps.
type Found struct {
	Prefix string  `json:"prefix"`
	Dumps  []*Dump `json:"dumps"`
	// Skipped says why files that exist were not used (too old, not a
	// regular file, unreadable, malformed).
	Skipped []string `json:"skipped,omitempty"`
}

// Find reads the dumps prefix+<rank> under root (a rank's /proc/PID/root,
// so a container's /tmp is the one read, or "" for a path on this
// machine). Files written before notBefore (the job's start) belong to an
// earlier run and are skipped. Every file in the prefix's directory whose
// name is the prefix's base followed by a rank number is tried, so dumps
// of other nodes copied into that directory are read too.
//
// A name is checked after it is opened, never before: a FIFO or symlink
// swapped in for a dump is refused without blocking (saferead), the read is
// bounded by maxFile and ends with ctx.
func Find(ctx context.Context, h *host.Host, root, prefix string, notBefore time.Time) Found {
	f := Found{Prefix: prefix}
	dir, base := path.Split(prefix)
	if dir == "" {
		dir = "./"
	}
	ents, err := h.ReadDir(path.Join(root, dir))
	if err != nil {
		return f
	}
	names := []string{}
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, base) {
			if _, err := strconv.Atoi(strings.TrimPrefix(n, base)); err == nil {
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	for _, n := range names {
		rank, _ := strconv.Atoi(strings.TrimPrefix(n, base))
		p := path.Join(root, dir, n)
		shown := path.Join(dir, n)
		// Lstat first only to skip, without opening, what is plainly not a
		// dump; ReadRegular checks the opened file again (it may have been
		// swapped since).
		fi, err := h.Lstat(p)
		switch {
		case err != nil:
			f.Skipped = append(f.Skipped, fmt.Sprintf("%s: %v", shown, err))
			continue
		case fi.Mode()&fs.ModeSymlink != 0:
			f.Skipped = append(f.Skipped, shown+": a symbolic link; not followed")
			continue
		case !fi.Mode().IsRegular():
			f.Skipped = append(f.Skipped, shown+": "+saferead.KindOf(fi.Mode())+", not a regular file")
			continue
		case !notBefore.IsZero() && fi.ModTime().Before(notBefore):
			f.Skipped = append(f.Skipped, fmt.Sprintf("%s: written %s, before this job started", shown, fi.ModTime().Format(time.RFC3339)))
			continue
		}
		b, err := h.ReadRegular(ctx, p, maxFile, false)
		if err != nil {
			if ctx.Err() != nil {
				f.Skipped = append(f.Skipped, fmt.Sprintf("%s: not read: %v", shown, ctx.Err()))
				break
			}
			f.Skipped = append(f.Skipped, fmt.Sprintf("%s: %v", shown, reason(err, p, shown)))
			continue
		}
		d, err := Parse(b, rank)
		if err != nil {
			f.Skipped = append(f.Skipped, fmt.Sprintf("%s: %v", shown, err))
			continue
		}
		d.Path = shown
		f.Dumps = append(f.Dumps, d)
	}
	return f
}

// reason is err for people, with the path as the user sees it (under a
// rank's /proc/PID/root the real path is long and says nothing).
func reason(err error, real, shown string) string {
	var ke *saferead.KindError
	if errors.As(err, &ke) {
		ke.Path = shown
		return "it was swapped for " + ke.Kind + " while ncclwiz read it; not read"
	}
	return strings.ReplaceAll(err.Error(), real, shown)
}
