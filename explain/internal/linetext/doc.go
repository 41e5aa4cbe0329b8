// Package linetext holds the reading engine's line-text primitives: the
// pieces of explain that look at the bytes of one line (or chunk) and know
// nothing of signatures, causes or the report. They live apart so that the
// analyses cannot reach into them and a change to one is a change to this
// package's tests alone.
//
//   - GramScanner (prefilter.go): which of many lower-case literals occur in
//     a text, in one pass at about a cycle per byte; explain's prefilter.
//   - RequiredLiterals, TrimContained, MinLen (literals.go): the literals
//     every match of a regexp contains, which feed the GramScanner.
//   - FastRe (fastre.go): a regexp behind exact literal and first-byte
//     guards, for patterns run on nearly every line.
//   - StripANSI, NeedsCleaning (ansi.go): terminal escapes and NULs removed.
//   - Parse, ParseRaw, Meta, Stamp (prefix.go): launcher, timestamp, glog
//     and NCCL prefixes read and stripped; Packed carries a worker's parse
//     to the ordered consumer without pointers.
//
// Only what explain uses is exported.
package linetext
