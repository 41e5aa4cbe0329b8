package hang

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
)

// Issue 25 item 15: a practice server does not show the real machine's
// noise ("dmesg is not installed… run as root") as its kernel log.
func TestPracticeServerHasNoKernelLog(t *testing.T) {
	_, err := kernelLog(context.Background(), &host.Host{Simulated: true, Root: t.TempDir()}, time.Now())
	if err == nil || !strings.Contains(err.Error(), "practice server has no kernel log") || strings.Contains(err.Error(), "run as root") {
		t.Errorf("kernelLog on a practice server: %v", err)
	}
}
