//go:build nonvml

package nvml

// Available is false in a -tags nonvml build: a fully static binary (for an
// image holding nothing else) that cannot dlopen the driver's library.
const Available = false

// DefaultLibrary is the soname the NVIDIA driver installs.
const DefaultLibrary = "libnvidia-ml.so.1"

// New returns an NVML whose Init says the library cannot be loaded.
func New() Interface { return none{} }

// NewFrom is New: this build loads no library.
func NewFrom(string) Interface { return none{} }

type none struct{}

func (none) Init() Return                                { return ERROR_LIBRARY_NOT_FOUND }
func (none) Shutdown() Return                            { return ERROR_UNINITIALIZED }
func (none) SystemGetDriverVersion() (string, Return)    { return "", ERROR_UNINITIALIZED }
func (none) SystemGetCudaDriverVersion() (int, Return)   { return 0, ERROR_UNINITIALIZED }
func (none) DeviceGetCount() (int, Return)               { return 0, ERROR_UNINITIALIZED }
func (none) DeviceGetHandleByIndex(int) (Device, Return) { return nil, ERROR_UNINITIALIZED }
