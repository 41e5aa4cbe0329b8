package cli

import (
	"fmt"
	"io"
)

func fmtFprintf(w io.Writer, format string, args ...any) (int, error) {
	return fmt.Fprintf(w, format, args...)
}
