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
// header must be caught here. The opcode table is pickle's (protocols 0-5).
func checkPickle(b []byte) error {
	i := 0
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

// plain converts what gopickle built into maps, slices and scalars.
func plain(v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("values nested deeper than %d: %w", maxDepth, ErrFormat)
	}
	switch x := v.(type) {
	case nil, bool, string, float64, int:
		return x, nil
	case int64:
		return int(x), nil
	case *big.Int:
		if x.IsInt64() {
			return int(x.Int64()), nil
		}
		return x.String(), nil
	case *types.Dict:
		m := make(map[string]any, x.Len())
		for _, e := range *x {
			k, ok := e.Key.(string)
			if !ok {
				k = fmt.Sprint(e.Key)
			}
			pv, err := plain(e.Value, depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = pv
		}
		return m, nil
	case *types.List:
		out := make([]any, 0, x.Len())
		for _, e := range *x {
			pv, err := plain(e, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, pv)
		}
		return out, nil
	case *types.Tuple:
		out := make([]any, 0, x.Len())
		for i := 0; i < x.Len(); i++ {
			pv, err := plain(x.Get(i), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, pv)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected value of type %T in a dump: %w", v, ErrFormat)
}

// decode reads a dump's bytes: a pickle (PyTorch's DebugInfoWriter, the
// default) or JSON (dump_nccl_trace_json, and writers that choose JSON).
func decode(b []byte) (map[string]any, error) {
	t := bytes.TrimSpace(b)
	var v any
	switch {
	case len(t) == 0:
		return nil, fmt.Errorf("empty file: %w", ErrFormat)
	case t[0] == '{':
		d := json.NewDecoder(bytes.NewReader(t))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("JSON dump: %v: %w", err, ErrFormat)
		}
		v = fromJSON(v, 0)
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
		if v, err = plain(raw, 0); err != nil {
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
