// Package explain reads the output of a failed multi-GPU job (torchrun,
// accelerate, deepspeed, mpirun, Slurm, Ray/vLLM) and names the line that
// matters: the root cause, its evidence and confidence, what merely followed
// from it, and the guide, checks and fixes that answer it. It also decodes
// PyTorch watchdog timeouts (hang or too slow) and summarises
// NCCL_DEBUG=INFO output (version, ranks, transports per peer, interfaces),
// failure or not.
//
// # Use
//
//	rep, err := explain.Analyze(ctx, []explain.Input{explain.FileInput("rank0.log"),
//		explain.FileInput("rank1.log.gz")}, explain.Options{})
//	render.WritePlain(w, rep, render.PlainOptions{Unicode: true}) // explain/render
//	render.WriteJSON(w, rep) // schema: report.schema.json
//
// An Input is a name and an Open function (FileInput, ReaderInput for
// stdin, or anything else). Several inputs are several ranks or nodes of
// one job. Gzip is recognised by its magic bytes. Analyze fails only when an
// input cannot be opened or the guides cannot be loaded; damaged input
// (binary data, NUL holes, invalid UTF-8, lines of many megabytes, a
// corrupt .gz) is read as far as possible and reported in Report.Warnings.
// New compiles the signatures once for repeated use (the wizard).
//
// # Signatures
//
// The signatures are those the guides declare (guides.Library.Signatures):
// one failure, one guide, its signatures with roles cause, wrapper,
// consequence or context. The explainer adds a precedence order for specific over
// generic, the ranks that only wait (watchdog timeouts), warnings that are
// notes rather than failures, and the benign lines of the reference
// (§1.3) that must never become diagnoses. Patterns and line prefixes cover
// the wordings of NCCL 2.1 to 2.30 and PyTorch 1.0 to 2.9; wordings_test.go
// lists each release's wording with the tag and file it comes from.
//
// # Causes outside NCCL
//
// A rank that raised a Python exception, was killed by the host's OOM
// killer, hit a device-side assert, lost a DataLoader worker, failed an
// import or filled the disk leaves NCCL lines on the other ranks. When
// those lines are only timeouts, teardown, wrappers and consequences (or
// the timestamps show the other cause came first), that cause is the root,
// marked Diagnosis.NotNCCL, and the NCCL diagnoses follow from it
// (causes.go). An exception that re-raises an NCCL or store error is not
// such a cause.
//
// # The parts
//
// Adding a message or a cause touches one obvious place:
//
//   - the reading engine (reader.go, pipeline.go, join.go): inputs, chunks,
//     the worker pool, wrapped lines joined; it hands lines to the scan in
//     input order (scan.go). Its line-text primitives, which know nothing
//     of the analyses, are explain/internal/linetext: the literal
//     prefilter and required-literal extraction, guarded regexps
//     (FastRe), ANSI cleaning, and launcher prefixes and line metadata;
//   - the catalogue (explain/catalog): every message of NCCL 2.4–2.30
//     (generated from its sources, nccl.tsv), PyTorch, gloo, the launchers
//     and the frameworks, each with its cause or its subsystem, as data
//     (catalog.yaml) with a generated test per row and the table in
//     docs/explain-catalog.md; a new message or cause is a row there;
//   - the analyses, each with its own file: signatures and the "Last
//     error:" payload (scan.go, catalog_use.go), watchdog records and
//     desync (watchdog.go), the NCCL_DEBUG digest (digest.go), facts across
//     hosts (hosts.go), causes outside NCCL (causes.go, cudaerr.go), logs
//     that stop (hang.go, hang_tail.go), ranks, launcher summaries and exit
//     codes (ranks.go);
//   - one decider, rank.go's diagnoses: root, knock-ons, culprit rank, and
//     never an all-clear when a line reads as a distributed failure;
//   - rendering (explain/render): plain and JSON output of a Report.
//
// # How a log is read
//
// Reading is a bounded two-stage pipeline over chunks of whole lines taken
// from a bufio.Reader, one input after another: workers (one per core)
// prefilter every byte of a chunk of any input with a 4-byte anchor bitmap
// of the signatures' required literals (extracted from their regexps with
// regexp/syntax) and find lines with escapes, NULs or carriage returns; the
// consumer runs the real regexps only on the few lines that can match, in
// input order, with all cross-line state (PyTorch's "Last error:" payload,
// torchrun's failure summary, ranks, timestamps), so several rank files
// are scanned concurrently yet explained as if read one by one. Regexps
// that run on many lines (the INFO digest, prefixes) are linetext.FastRe: exact
// literal and first-byte guards reject most lines before the regexp runs.
// Memory is a handful of 1 MiB buffers whatever the number and size of the
// inputs; a line longer than Options.MaxLineBytes keeps its first part and
// is marked truncated; a gzip input that proves binary (a bomb of zeros)
// is left unread after its first 64 MiB.
package explain
