package flightrec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"
)

// ErrFormat marks a file that is not a flight-recorder dump.
var ErrFormat = errors.New("not a flight-recorder dump")

// checkPickle walks the opcodes of a pickle without building anything and
// refuses one whose length fields reach past its end: gopickle allocates
// what a length field says before reading, so a hostile 4 GiB string
// header must be caught here. Each opcode builds at most one value or memo
// slot, so their number bounds what the unpickler allocates: more than
// maxOps is refused before anything is built. The opcode table is pickle's
// (protocols 0-5).
func checkPickle(b []byte) error {
	i, ops := 0, 0
	need := func(n uint64) error {
		if n > uint64(len(b)-i) {
			return fmt.Errorf("pickle field of %d bytes at offset %d runs past the end (%d bytes): %w", n, i, len(b), ErrFormat)
		}
		i += int(n)
		return nil
	}
	line := func() error {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return fmt.Errorf("unterminated pickle line at offset %d: %w", i, ErrFormat)
		}
		i += j + 1
		return nil
	}
	for i < len(b) {
		op := b[i]
		i++
		if ops++; ops > maxOps {
			return fmt.Errorf("more than %d pickle opcodes (a dump of PyTorch's default 2000 entries has about 200,000): %w", maxOps, ErrFormat)
		}
		var err error
		switch op {
		case '.': // STOP
			return nil
		case '(', '0', '1', '2', 'N', ']', 'a', 'e', 'l', ')', 't', 0x85, 0x86, 0x87, '}', 'd', 's', 'u', 'o', 'R', 'b',
			0x81, 0x88, 0x89, 'Q', 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94, 0x97, 0x98:
		case 'K', 0x80, 'h', 'q', 0x82: // one-byte argument
			err = need(1)
		case 'M', 0x83:
			err = need(2)
		case 'J', 'j', 'r', 0x84:
			err = need(4)
		case 'G', 0x95: // BINFLOAT, FRAME (the frame holds opcodes: walk on)
			err = need(8)
		case 0x8a, 'U', 0x8c, 'C': // one-byte length
			if err = need(1); err == nil {
				err = need(uint64(b[i-1]))
			}
		case 0x8b, 'T', 'X', 'B': // four-byte length
			if err = need(4); err == nil {
				err = need(uint64(binary.LittleEndian.Uint32(b[i-4 : i])))
			}
		case 0x8d, 0x8e, 0x96: // eight-byte length
			if err = need(8); err == nil {
				err = need(binary.LittleEndian.Uint64(b[i-8 : i]))
			}
		case 'I', 'L', 'F', 'S', 'V', 'g', 'p', 'P':
			err = line()
		case 'c', 'i':
			if err = line(); err == nil {
				err = line()
			}
		default:
			return fmt.Errorf("unknown pickle opcode 0x%02x at offset %d: %w", op, i-1, ErrFormat)
		}
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("pickle ends without STOP: %w", ErrFormat)
}

// refuseClass stops the unpickler from building any class: a dump holds
// only dicts, lists, tuples, strings, numbers, booleans and None.
func refuseClass(module, name string) (any, error) {
	return nil, fmt.Errorf("dump names a Python class %s.%s: %w", module, name, ErrFormat)
}

// maxDepth bounds the nesting of a dump's values (a dump nests four deep;
// a hostile pickle can build a list that contains itself).
const maxDepth = 32

// A dump is decoded into plain values under a budget. A pickle can
// reference one value many times (MEMO/GET): `a=[a,a]` 31 times is 1 KiB
// of pickle and 2^31 values once expanded, so every value is counted each
// time it is expanded, and so is every byte of text; JSON has no sharing,
// but decoding it into generic values costs ten times its size, so it is
// decoded one entry at a time under the same budget. The limits leave
// room for 200,000 entries, a hundred times PyTorch's default ring.
const (
	maxOps     = 16_000_000
	maxEntries = 200_000
	maxValues  = 4_000_000
	maxBytes   = 64 << 20
)

// skipKeys are never decoded: an entry's Python stack ("frames") is most
// of a dump and nothing here reads it.
var skipKeys = map[string]bool{"frames": true}

// budget counts what decoding has built so far.
type budget struct {
	values int
	bytes  int
}

func (b *budget) take(values, bytes int) error {
	b.values += values
	b.bytes += bytes
	switch {
	case b.values > maxValues:
		return fmt.Errorf("more than %d values once shared references are expanded (a hostile or corrupt dump): %w", maxValues, ErrFormat)
	case b.bytes > maxBytes:
		return fmt.Errorf("more than %d MiB of text once shared references are expanded (a hostile or corrupt dump): %w", maxBytes>>20, ErrFormat)
	}
	return nil
}

// plain converts what gopickle built into maps, slices and scalars,
// counting every value against b (a shared one each time it is reached).
func plain(v any, depth int, b *budget) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("values nested deeper than %d: %w", maxDepth, ErrFormat)
	}
	if err := b.take(1, 0); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case nil, bool, float64, int:
		return x, nil
	case string:
		return x, b.take(0, len(x))
	case int64:
		return int(x), nil
	case *big.Int:
		if x.IsInt64() {
			return int(x.Int64()), nil
		}
		s := x.String()
		return s, b.take(0, len(s))
	case *types.Dict:
		m := make(map[string]any, min(x.Len(), 64))
		for _, e := range *x {
			k, ok := e.Key.(string)
			if !ok {
				k = fmt.Sprint(e.Key)
			}
			if skipKeys[k] {
				continue
			}
			if err := b.take(0, len(k)); err != nil {
				return nil, err
			}
			pv, err := plain(e.Value, depth+1, b)
			if err != nil {
				return nil, err
			}
			m[k] = pv
		}
		return m, nil
	case *types.List:
		return plainSeq(x.Len(), func(i int) any { return x.Get(i) }, depth, b)
	case *types.Tuple:
		return plainSeq(x.Len(), func(i int) any { return x.Get(i) }, depth, b)
	}
	return nil, fmt.Errorf("unexpected value of type %T in a dump: %w", v, ErrFormat)
}

func plainSeq(n int, get func(int) any, depth int, b *budget) (any, error) {
	// The length is charged before the slice is made: a list of a million
	// references to one big list must not allocate first and count later.
	if err := b.take(n, 0); err != nil {
		return nil, err
	}
	b.values -= n
	out := make([]any, 0, n)
	for i := 0; i < n; i++ {
		pv, err := plain(get(i), depth+1, b)
		if err != nil {
			return nil, err
		}
		out = append(out, pv)
	}
	return out, nil
}

// decode reads a dump's bytes: a pickle (PyTorch's DebugInfoWriter, the
// default) or JSON (dump_nccl_trace_json, and writers that choose JSON).
func decode(b []byte) (map[string]any, error) {
	t := bytes.TrimSpace(b)
	var v any
	var bud budget
	switch {
	case len(t) == 0:
		return nil, fmt.Errorf("empty file: %w", ErrFormat)
	case t[0] == '{':
		return decodeJSON(t, &bud)
	case b[0] == 0x80:
		if err := checkPickle(b); err != nil {
			return nil, err
		}
		u := pickle.NewUnpickler(bytes.NewReader(b))
		u.FindClass = refuseClass
		raw, err := safeLoad(&u)
		if err != nil {
			return nil, err
		}
		if v, err = plain(raw, 0, &bud); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("neither a pickle nor JSON: %w", ErrFormat)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("top level is %T, not a dict: %w", v, ErrFormat)
	}
	return m, nil
}

// decodeJSON reads a JSON dump key by key and its entries one at a time,
// so that what is built is only what the analysis reads, under b.
func decodeJSON(t []byte, b *budget) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(t))
	d.UseNumber()
	bad := func(err error) error { return fmt.Errorf("JSON dump: %v: %w", err, ErrFormat) }
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return nil, bad(fmt.Errorf("not an object (%v)", err))
	}
	m := map[string]any{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, bad(err)
		}
		key, _ := tok.(string)
		if key != "entries" {
			var raw json.RawMessage
			if err := d.Decode(&raw); err != nil {
				return nil, bad(err)
			}
			switch key {
			case "version", "pg_config", "pg_status":
				v, err := jsonValue(raw, b)
				if err != nil {
					return nil, err
				}
				m[key] = v
			}
			continue
		}
		if tok, err := d.Token(); err != nil || tok != json.Delim('[') {
			return nil, bad(fmt.Errorf("\"entries\" is not a list (%v)", err))
		}
		var entries []any
		for d.More() {
			if len(entries) == maxEntries {
				return nil, fmt.Errorf("more than %d entries (PyTorch's default ring holds 2000): %w", maxEntries, ErrFormat)
			}
			// A struct, not a map: keys it does not name (the stack in
			// "frames", most of a dump) are skipped without being copied.
			var e jsonEntry
			if err := d.Decode(&e); err != nil {
				return nil, bad(err)
			}
			pe := make(map[string]any, 12)
			for k, raw := range e.fields() {
				if raw == nil {
					continue
				}
				v, err := jsonValue(raw, b)
				if err != nil {
					return nil, err
				}
				pe[k] = v
			}
			if err := b.take(1, 0); err != nil {
				return nil, err
			}
			entries = append(entries, pe)
		}
		if _, err := d.Token(); err != nil {
			return nil, bad(err)
		}
		m["entries"] = entries
	}
	return m, nil
}

// jsonEntry holds the fields of an entry Parse reads, undecoded.
type jsonEntry struct {
	ProfilingName json.RawMessage `json:"profiling_name"`
	State         json.RawMessage `json:"state"`
	RecordID      json.RawMessage `json:"record_id"`
	PGID          json.RawMessage `json:"pg_id"`
	Seq           json.RawMessage `json:"collective_seq_id"`
	P2PSeq        json.RawMessage `json:"p2p_seq_id"`
	IsP2P         json.RawMessage `json:"is_p2p"`
	PG            json.RawMessage `json:"process_group"`
	InSizes       json.RawMessage `json:"input_sizes"`
	OutSizes      json.RawMessage `json:"output_sizes"`
	InDtypes      json.RawMessage `json:"input_dtypes"`
	OutDtypes     json.RawMessage `json:"output_dtypes"`
}

func (e *jsonEntry) fields() map[string]json.RawMessage {
	return map[string]json.RawMessage{"profiling_name": e.ProfilingName, "state": e.State, "record_id": e.RecordID, "pg_id": e.PGID,
		"collective_seq_id": e.Seq, "p2p_seq_id": e.P2PSeq, "is_p2p": e.IsP2P, "process_group": e.PG,
		"input_sizes": e.InSizes, "output_sizes": e.OutSizes, "input_dtypes": e.InDtypes, "output_dtypes": e.OutDtypes}
}

// jsonValue decodes one small JSON value under b. Its values are counted
// from the text before anything is built (a value is at most one per
// structural byte), so a huge list is refused, not decoded.
func jsonValue(raw json.RawMessage, b *budget) (any, error) {
	if err := b.take(countJSON(raw), len(raw)); err != nil {
		return nil, err
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("JSON dump: %v: %w", err, ErrFormat)
	}
	return fromJSON(v, 0), nil
}

// countJSON bounds the number of values in a JSON text: one, plus one per
// comma, colon or opening bracket outside strings.
func countJSON(raw []byte) int {
	n, inStr, esc := 1, false, false
	for _, c := range raw {
		switch {
		case esc:
			esc = false
		case inStr:
			switch c {
			case '\\':
				esc = true
			case '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == ',' || c == ':' || c == '[' || c == '{':
			n++
		}
	}
	return n
}

// safeLoad runs the unpickler; a malformed stream must give an error, not
// take ncclwiz down.
func safeLoad(u *pickle.Unpickler) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("malformed pickle (%v): %w", r, ErrFormat)
		}
	}()
	v, err = u.Load()
	if err != nil {
		return nil, fmt.Errorf("pickle: %v: %w", err, ErrFormat)
	}
	return v, nil
}

func fromJSON(v any, depth int) any {
	if depth > maxDepth {
		return nil
	}
	switch x := v.(type) {
	case json.Number:
		if n, err := strconv.ParseInt(x.String(), 10, 64); err == nil {
			return int(n)
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = fromJSON(e, depth+1)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = fromJSON(e, depth+1)
		}
		return x
	}
	return v
}

// asInt reads an int that JSON dumps may carry as a string ("pg_status").
func asInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case float64:
		return int(x), true
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(x))
		return n, err == nil
	}
	return 0, false
}

func asString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}
