package explain

import (
	"fmt"
	"testing"
)

// wording is one release range's wording of a signature: the format string
// at the tag and file:line in source, filled with values of our own and
// printed with that release's prefix. A pattern edit that drops a release
// fails here.
type wording struct {
	sig      string
	releases string // NCCL minors ("2.4-2.9") or torch releases ("torch 1.8")
	source   string // tag and file:line of the format string, or the thread it is seen in
	line     string
	fields   map[string]string // captures the signature must name (first non-empty per name)
}

// NCCL line prefixes by release (src/debug.cc at each tag): 2.4-2.25
// "host:pid:tid [dev] file:line NCCL WARN "; 2.26-2.29 add a "[date time] "
// stamp by default (NCCL_DEBUG_TIMESTAMP_LEVELS); 2.30 may add "(func) "
// before NCCL.
func warn(minor int, fileLine, msg string) string {
	head := fmt.Sprintf("gpu-n%02d:40%02d:41%02d [1] %s NCCL WARN ", minor, minor, minor, fileLine)
	if minor >= 26 {
		head = "[2026-02-11 04:15:09] " + head
	}
	return head + msg
}

// warnFunc is 2.30's WARN with the calling function's name.
func warnFunc(fileLine, fn, msg string) string {
	return "[2026-03-02 10:11:12] dgx-b07:7731:7790 [3] " + fileLine + " (" + fn + ") NCCL WARN " + msg
}

var wordings = []wording{
	// /dev/shm creation.
	{"shm-create-nospace", "2.4-2.11", "v2.11.4-1 src/include/shm.h:28 + src/include/checks.h:40 (SYSCHECK)",
		warn(7, "include/shm.h:28", "Call to posix_fallocate failed : No space left on device"), nil},
	{"shm-create-nospace", "2.12-2.15", "v2.15.5-1 src/misc/shmutils.cc:38",
		warn(14, "misc/shmutils.cc:38", "Error: failed to extend /dev/shm/nccl-q8Zr1c to 9637888 bytes"),
		map[string]string{"path": "/dev/shm/nccl-q8Zr1c", "bytes": "9637888"}},
	{"shm-create-nospace", "2.16-2.21", "v2.21.5-1 src/misc/shmutils.cc:72",
		warn(21, "misc/shmutils.cc:72", "Error: failed to extend /dev/shm/nccl-Wm3kPa to 9637892 bytes"),
		map[string]string{"path": "/dev/shm/nccl-Wm3kPa", "bytes": "9637892"}},
	{"shm-create-nospace", "2.22-2.29", "v2.22.3-1 src/misc/shmutils.cc:87",
		warn(27, "misc/shmutils.cc:87", "Error: failed to extend /dev/shm/nccl-Hh0tQe to 33554436 bytes, error: No space left on device (28)"),
		map[string]string{"path": "/dev/shm/nccl-Hh0tQe", "bytes": "33554436"}},
	{"shm-create-nospace", "2.30", "v2.30.7-1 src/os/linux.cc:795",
		warnFunc("os/linux.cc:795", "ncclOsShmOpen", "Error: failed to extend /dev/shm/nccl-Lx0b2M to 9637892 bytes, error: No space left on device (28)"),
		map[string]string{"path": "/dev/shm/nccl-Lx0b2M"}},
	{"shm-create-nospace", "2.22-2.23", "v2.23.4-1 src/misc/shmutils.cc:73 (prints the path pointer, %p)",
		warn(23, "misc/shmutils.cc:73", "Error: failed to create shared memory file 0x7ffd5e1c8a40, error No space left on device (28)"), nil},
	{"shm-create-nospace", "2.24-2.30", "v2.29.7-1 src/misc/shmutils.cc:74",
		warn(24, "misc/shmutils.cc:74", "Error: failed to create shared memory file /dev/shm/nccl-XXXXXX, error No space left on device (28)"), nil},
	{"shm-create-failed", "2.4-2.7", "v2.7.8-1 src/include/shm.h:48 (trailing \\n)",
		warn(5, "include/shm.h:48", "Error while creating shared memory segment nccl-shm-recv-5d41a2c0e7b3f911-0-1-0 (size 4460544)"),
		map[string]string{"path": "nccl-shm-recv-5d41a2c0e7b3f911-0-1-0", "size": "4460544"}},
	{"shm-create-failed", "2.4-2.11", "v2.11.4-1 src/include/shm.h:42 (CUDACHECKGOTO(cudaHostRegister)); https://github.com/horovod/horovod/issues/893",
		warn(4, "include/shm.h:42", "Cuda failure 'invalid argument'"), map[string]string{"cuda_error": "invalid argument"}},
	{"shm-create-failed", "2.16-2.21", "v2.21.5-1 src/misc/shmutils.cc (size %ld)",
		warn(18, "misc/shmutils.cc:110", "Error while creating shared memory segment /dev/shm/nccl-vB7a2Q (size 9637888)"),
		map[string]string{"path": "/dev/shm/nccl-vB7a2Q", "size": "9637888"}},
	{"shm-create-failed", "2.22-2.30", "v2.23.4-1 src/misc/shmutils.cc:128; v2.30.7-1 src/os/linux.cc:842",
		warnFunc("os/linux.cc:842", "ncclOsShmOpen", "Error while creating shared memory segment /dev/shm/nccl-3jPq0d (size 9637888), error: No space left on device (28)"),
		map[string]string{"size": "9637888"}},
	// Attach and unlink.
	{"shm-attach-enoent", "2.8-2.11", "v2.11.4-1 src/include/shm.h:48",
		warn(10, "include/shm.h:48", "Error while attaching to shared memory segment nccl-shm-send-1f0e9d8c7b6a5948-1-0-1 (size 4460544)"),
		map[string]string{"size": "4460544"}},
	{"shm-attach-enoent", "2.23-2.30", "v2.23.4-1 src/misc/shmutils.cc:128",
		warn(23, "misc/shmutils.cc:128", "Error while attaching to shared memory segment /dev/shm/nccl-tR5vWc (size 9637888), error: No such file or directory (2)"),
		map[string]string{"path": "/dev/shm/nccl-tR5vWc", "size": "9637888"}},
	{"shm-attach-size0", "2.23-2.30", "v2.30.7-1 src/os/linux.cc:842",
		warnFunc("os/linux.cc:842", "ncclOsShmOpen", "Error while attaching to shared memory segment /dev/shm/nccl- (size 0), error: No such file or directory (2)"), nil},
	{"shm-unlink-enoent", "2.4-2.11", "v2.11.4-1 src/include/shm.h:58 + src/include/checks.h (SYSCHECK)",
		warn(9, "include/shm.h:58", "Call to shm_unlink failed : No such file or directory"), nil},
	{"shm-unlink-enoent", "2.12-2.15", "v2.15.5-1 src/misc/shmutils.cc:80 + src/include/checks.h (SYSCHECK)",
		warn(13, "misc/shmutils.cc:80", "Call to unlink failed : No such file or directory"), nil},
	{"shm-unlink-enoent", "2.16-2.21", "v2.21.5-1 src/misc/shmutils.cc:132",
		warn(19, "misc/shmutils.cc:132", "unlink shared memory /dev/shm/nccl-Pq2w9Z failed, error: No such file or directory"),
		map[string]string{"path": "/dev/shm/nccl-Pq2w9Z"}},
	{"shm-unlink-enoent", "2.22-2.30", "v2.29.7-1 src/misc/shmutils.cc:152",
		warn(28, "misc/shmutils.cc:152", "unlink shared memory /dev/shm/nccl-Pq2w9Z failed, error: No such file or directory (2)"),
		map[string]string{"path": "/dev/shm/nccl-Pq2w9Z"}},
	{"cumem-host-alloc", "2.26-2.30", "v2.30.7-1 src/misc/cudawrap.cc:92 (INFO)",
		"gpu-n30:4030:4130 [0] NCCL INFO cuMem host allocations do not appear to be working; falling back to a /dev/shm/ based implementation", nil},

	// Sockets.
	{"socket-connect-failed", "2.2", "https://github.com/NVIDIA/nccl-tests/issues/15 (NCCL 2.2.13: no NCCL before WARN; SYSCHECK wording)",
		"gpu-c12:18553:18611 [0] include/socket.h:360 WARN Call to connect failed : Connection timed out",
		map[string]string{"error": "Connection timed out"}},
	{"socket-connect-failed", "2.3", "v2.3.7-1 src/include/core.h:306 (SYSCHECKVALEXP)",
		warn(3, "include/socket.h:369", "Call to connect failed : No route to host"), map[string]string{"error": "No route to host"}},
	{"socket-connect-failed", "2.3", "v2.3.7-1 src/include/core.h:298 (SYSCHECKNTIMES after the retries)",
		warn(3, "include/socket.h:369", "Call to connect timeout : Connection refused"), map[string]string{"error": "Connection refused"}},
	{"socket-connect-failed", "2.4-2.9", "v2.9.9-1 src/include/socket.h:406",
		warn(6, "include/socket.h:406", "Connect to 10.20.0.7<50119> failed : Connection refused"),
		map[string]string{"peer": "10.20.0.7<50119>", "error": "Connection refused"}},
	{"socket-connect-failed", "2.10-2.15", "v2.15.5-1 src/misc/socket.cc:456",
		warn(12, "misc/socket.cc:456", "Net : Connect to 10.20.0.7<50119> failed : No route to host"),
		map[string]string{"peer": "10.20.0.7<50119>", "error": "No route to host"}},
	{"socket-connect-failed", "2.16-2.23", "v2.23.4-1 src/misc/socket.cc:485",
		warn(18, "misc/socket.cc:485", "socketStartConnect: Connect to 192.168.40.3<38221> failed : Software caused connection abort"),
		map[string]string{"peer": "192.168.40.3<38221>"}},
	{"socket-connect-failed", "2.16-2.23", "v2.23.4-1 src/misc/socket.cc:468",
		warn(17, "misc/socket.cc:468", "socketStartConnect: exceeded retries (20000)"), map[string]string{"attempts": "20000"}},
	{"socket-connect-failed", "2.16-2.23", "v2.23.4-1 src/misc/socket.cc:527",
		warn(20, "misc/socket.cc:527", "socketPollConnect: exceeded timeouts (20000)"), map[string]string{"attempts": "20000"}},
	{"socket-connect-failed", "2.20-2.23", "v2.23.4-1 src/misc/socket.cc:535",
		warn(22, "misc/socket.cc:535", "socketPollConnect: Connect to 10.1.4.12<46379> returned 113(No route to host) errno 115(Operation now in progress)"),
		map[string]string{"peer": "10.1.4.12<46379>"}},
	{"socket-connect-failed", "2.24-2.26", "v2.26.6-1 src/misc/socket.cc:544",
		warn(25, "misc/socket.cc:544", "socketPollConnect: connect returned Connection refused, exceeded error retry count (35)"),
		map[string]string{"error": "Connection refused", "attempts": "35"}},
	{"socket-connect-failed", "2.24-2.26", "v2.26.6-1 src/misc/socket.cc:556",
		warn(26, "misc/socket.cc:556", "socketStartConnect: Connect to 10.1.4.12<46379> failed : Network is unreachable"),
		map[string]string{"peer": "10.1.4.12<46379>"}},
	{"socket-connect-failed", "2.24-2.26", "v2.26.6-1 src/misc/socket.cc:580",
		warn(24, "misc/socket.cc:580", "socketPollConnect poll() failed with error Interrupted system call"), nil},
	{"socket-connect-failed", "2.27-2.30", "v2.29.7-1 src/os/linux.cc:221; v2.30.7-1 src/os/linux.cc:288",
		warn(29, "os/linux.cc:221", "ncclOsSocketPollConnect: connect to 10.1.4.12<46379> returned Connection refused, exceeded error retry count after 35 attempts"),
		map[string]string{"peer": "10.1.4.12<46379>", "error": "Connection refused", "attempts": "35"}},
	{"socket-connect-failed", "2.27-2.28", "v2.28.9-1 src/misc/socket.cc:622",
		warn(28, "misc/socket.cc:622", "socketPollConnect to 10.1.4.12<46379> failed with error Connection reset by peer"),
		map[string]string{"peer": "10.1.4.12<46379>"}},
	{"socket-connect-failed", "2.29-2.30", "v2.30.7-1 src/os/linux.cc:328",
		warnFunc("os/linux.cc:328", "ncclOsSocketPollConnect", "ncclOsSocketPollConnect to 10.1.4.12<46379> failed with error Connection timed out"),
		map[string]string{"peer": "10.1.4.12<46379>", "error": "Connection timed out"}},
	{"peer-closed", "2.2", "https://github.com/NVIDIA/nccl-tests/issues/15 (NCCL 2.2.13, no NCCL before WARN, no 'Net : ')",
		"gpu-c12:18553:18612 [0] include/socket.h:371 WARN Connection closed by remote peer", nil},
	{"peer-closed", "2.3-2.9", "v2.3.7-1 src/include/socket.h:380; v2.9.9-1 src/include/socket.h:419 (no peer address)",
		warn(8, "include/socket.h:419", "Net : Connection closed by remote peer"), nil},
	{"peer-closed", "2.4-2.9", "v2.9.9-1 src/include/socket.h:424",
		warn(8, "include/socket.h:424", "Call to recv failed : Connection reset by peer"), map[string]string{"error": "Connection reset by peer"}},
	{"peer-closed", "2.10-2.15", "v2.15.5-1 src/misc/socket.cc:538",
		warn(11, "misc/socket.cc:538", "Net : Connection closed by remote peer node4.ib<57412>"), map[string]string{"peer": "node4.ib<57412>"}},
	{"peer-closed", "2.10-2.15", "v2.15.5-1 src/misc/socket.cc:518",
		warn(15, "misc/socket.cc:518", "Net : Call to recv from 10.3.0.9<41133> failed : Connection reset by peer"),
		map[string]string{"peer": "10.3.0.9<41133>", "error": "Connection reset by peer"}},
	{"peer-closed", "2.16-2.30", "v2.26.6-1 src/misc/socket.cc:71; v2.30.7-1 src/misc/socket.cc:58",
		warnFunc("misc/socket.cc:58", "socketProgress", "socketProgress: Connection closed by remote peer node4.ib<57412>"),
		map[string]string{"peer": "node4.ib<57412>"}},
	{"peer-closed", "2.16-2.23", "v2.23.4-1 src/misc/socket.cc:30",
		warn(21, "misc/socket.cc:30", "socketProgressOpt: Call to recv from 10.3.0.9<41133> failed : Connection reset by peer"),
		map[string]string{"peer": "10.3.0.9<41133>"}},
	{"peer-closed", "2.29", "v2.29.7-1 src/os/windows.cc:301 (errno and text)",
		warn(29, "os/linux.cc:301", "ncclOsSocketProgressOpt: Call to send to 10.3.0.9<41133> failed : 32 (Broken pipe)"),
		map[string]string{"peer": "10.3.0.9<41133>"}},
	{"peer-closed", "2.17-2.30", "v2.29.7-1 src/proxy.cc:1326",
		warn(27, "proxy.cc:1326", "Socket recv failed while polling for opId=0x7f3a5c0091e0"), nil},
	{"socket-msg-truncated", "2.4-2.9", "v2.9.9-1 src/transport/net_socket.cc:418 (no peer)",
		warn(7, "transport/net_socket.cc:418", "NET/Socket : message truncated : receiving 1048576 bytes instead of 65536"),
		map[string]string{"got": "1048576", "want": "65536"}},
	{"socket-msg-truncated", "2.4 (TensorFlow build)", "https://github.com/NVIDIA/nccl/issues/268 (source path of a bazel build before the file)",
		"hvd1:2918:3333 [0] external/nccl_archive/src/transport/net_socket.cc:200 NCCL WARN NET/Socket : message truncated : receiving 696320 bytes instead of 32768",
		map[string]string{"got": "696320", "want": "32768"}},
	{"socket-msg-truncated", "2.10-2.11", "v2.11.4-1 src/transport/net_socket.cc:424",
		warn(11, "transport/net_socket.cc:424", "NET/Socket : peer 10.9.1.2<38113> message truncated : receiving 1048576 bytes instead of 65536"),
		map[string]string{"peer": "10.9.1.2<38113>"}},
	{"socket-msg-truncated", "2.12-2.30", "v2.26.6-1 src/transport/net_socket.cc:545; v2.30.7-1 src/transport/net_socket.cc:636",
		warn(26, "transport/net_socket.cc:545", "NET/Socket : peer 10.9.1.2<38113> message truncated : receiving 1048576 bytes instead of 65536. If you believe your socket network is in healthy state, there may be a mismatch in collective sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks"),
		map[string]string{"peer": "10.9.1.2<38113>", "got": "1048576"}},
	{"bootstrap-mismatch", "2.4-2.7", "v2.7.8-1 src/bootstrap.cc:136",
		warn(7, "bootstrap.cc:136", "Message truncated : received 2048 bytes instead of 4"), map[string]string{"got": "2048", "want": "4"}},
	{"bootstrap-mismatch", "2.28-2.30", "v2.30.7-1 src/bootstrap.cc:249",
		warn(28, "bootstrap.cc:249", "Message truncated : received 64,8 bytes instead of 8,8"), map[string]string{"got": "64"}},
	{"bootstrap-mismatch", "2.4-2.22", "v2.22.3-1 src/bootstrap.cc:140",
		warn(16, "bootstrap.cc:140", "Bootstrap Root : mismatch in rank count from procs 8 : 16"), nil},
	{"bootstrap-mismatch", "2.23-2.30", "v2.28.9-1 src/bootstrap.cc:327",
		warn(28, "bootstrap.cc:327", "Bootstrap Root : mismatch in info from procs, nranks 16 vs 8, nroots 1 vs 1, iroot 0 vs 0"), nil},
	{"bootstrap-mismatch", "2.4-2.30", "v2.30.7-1 src/bootstrap.cc:348",
		warn(9, "bootstrap.cc:348", "Bootstrap Root : rank 3 of 8 ranks has already checked in"), map[string]string{"rank": "3", "nranks": "8"}},
	{"bootstrap-mismatch", "2.16-2.26", "v2.26.6-1 src/misc/socket.cc:503",
		warn(19, "misc/socket.cc:503", "socketFinalizeAccept: wrong type 4 != 3"), nil},
	{"bootstrap-mismatch", "2.27-2.29", "v2.29.7-1 src/misc/socket.cc:337",
		warn(29, "misc/socket.cc:337", "socketFinalizeAccept from 10.0.0.5<55002>: wrong type 4 != 3"), nil},
	{"no-socket-interface", "2.4-2.30", "v2.30.7-1 src/bootstrap.cc:126",
		warn(6, "bootstrap.cc:126", "Bootstrap : no socket interface found"), nil},
	{"no-socket-interface", "2.4-2.30", "v2.30.7-1 src/transport/net_socket.cc:61",
		warn(30, "transport/net_socket.cc:61", "NET/Socket : no interface found"), nil},
	{"no-socket-interface", "2.23", "v2.23.4-1 src/bootstrap.cc:510",
		warn(23, "bootstrap.cc:510", "no device found matching NCCL_OOB_NET_IFNAME=ens9f1, ignoring"), nil},
	{"no-socket-interface", "2.24-2.30", "v2.30.7-1 src/bootstrap.cc:577",
		warn(27, "bootstrap.cc:577", "no device found matching exactly ens9f1, verify NCCL_OOB_NET_IFNAME"), nil},

	// Proxy thread.
	{"proxy-failure", "2.12-2.14", "v2.14.3-1 src/proxy.cc:1059",
		warn(13, "proxy.cc:1059", "[Proxy Service] Poll failed with error 4"), map[string]string{"poll_error": "4"}},
	{"proxy-failure", "2.13-2.17", "v2.17.1-1 src/proxy.cc:1364",
		warn(15, "proxy.cc:1364", "[Proxy Service] Failed to set CUDA context on device 2"), map[string]string{"device": "2"}},
	{"proxy-failure", "2.12-2.30", "v2.17.1-1 src/proxy.cc:1489; v2.30.7-1 src/proxy.cc:1905",
		warn(17, "proxy.cc:1489", "[Proxy Service 5] Failed to execute operation Connect from rank 5, retcode 2"),
		map[string]string{"operation": "Connect", "rank": "5", "retcode": "2"}},
	{"proxy-failure", "2.20-2.30", "v2.30.7-1 src/proxy.cc:2003",
		warnFunc("proxy.cc:2003", "proxyUDSService", "[Proxy Service UDS] Poll failed: Interrupted system call"),
		map[string]string{"poll_error": "Interrupted system call"}},
	{"proxy-failure", "2.17-2.30", "v2.29.7-1 src/proxy.cc:1716",
		warn(29, "proxy.cc:1716", "[Service thread] Error encountered progressing operation=Connect, res=3, closing connection"),
		map[string]string{"operation": "Connect", "res": "3"}},
	{"proxy-failure", "2.17-2.30", "v2.29.7-1 src/proxy.cc:1727",
		warn(29, "proxy.cc:1727", "[Service thread] Could not receive type from localRank 6, res=3, closed=0"),
		map[string]string{"local_rank": "6"}},
	{"proxy-failure", "2.8-2.11", "v2.11.4-1 src/bootstrap.cc:268",
		warn(10, "bootstrap.cc:268", "[Rem Allocator] Poll failed with error 9"), map[string]string{"poll_error": "9"}},
	{"proxy-failure", "2.20-2.30", "v2.22.3-1 src/proxy.cc:1063",
		warn(22, "proxy.cc:1063", "ncclProxyCallBlockingUDS call to tpRank 3(5e1f0c9a77d2b410) failed : 6"),
		map[string]string{"tp_rank": "3", "code": "6"}},
	{"proxy-failure", "2.17-2.18", "v2.18.6-1 src/misc/ipcsocket.cc:193",
		warn(18, "misc/ipcsocket.cc:193", "UDS: Sending data over socket /tmp/nccl-socket-3-5e1f0c9a77d2b410 failed : 111"), nil},
	{"proxy-failure", "2.29-2.30", "v2.30.7-1 src/os/linux_ipcsocket.cc:158",
		warn(30, "os/linux_ipcsocket.cc:158", "UDS: Receiving data over socket /tmp/nccl-socket-3-5e1f0c9a77d2b410 failed"), nil},

	// InfiniBand / RoCE.
	{"ib-completion-error", "2.4-2.9", "v2.9.9-1 src/transport/net_ib.cc:846 (no peer)",
		warn(8, "transport/net_ib.cc:846", "NET/IB : Got completion with error 12, opcode 0, len 32768, vendor err 129"),
		map[string]string{"error": "12"}},
	{"ib-completion-error", "2.10-2.17", "v2.17.1-1 src/transport/net_ib.cc:1261",
		warn(14, "transport/net_ib.cc:1261", "NET/IB : Got completion from peer 10.12.0.4<36187> with error 5, opcode 0, len 0, vendor err 249"),
		map[string]string{"peer": "10.12.0.4<36187>", "error": "5"}},
	{"ib-completion-error", "2.18-2.19", "v2.19.4-1 src/transport/net_ib.cc:1333 (empty peer, https://github.com/NVIDIA/nccl/issues/1052)",
		warn(18, "transport/net_ib.cc:1333", "NET/IB : Got completion from peer with error 4, opcode 0, len 0, vendor err 81 (Send) localGid ::ffff:10.12.0.3 remoteGid ::ffff:10.12.0.4"),
		map[string]string{"error": "4"}},
	{"ib-completion-error", "2.20-2.21", "v2.21.5-1 src/transport/net_ib.cc:1909",
		warn(21, "transport/net_ib.cc:1909", "NET/IB : Got completion from peer 10.12.0.4<36187> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid fe80::a288:c2ff:fe3e:1a20 remoteGid fe80::a288:c2ff:fe3e:1b10"),
		map[string]string{"peer": "10.12.0.4<36187>", "status": "12"}},
	{"ib-completion-error", "2.22-2.27", "v2.27.7-1 src/transport/net_ib.cc:2458",
		warn(26, "transport/net_ib.cc:2458", "NET/IB: Got completion from peer 10.12.0.4<36187> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.12.0.3 remoteGid ::ffff:10.12.0.4 hca mlx5_3"),
		map[string]string{"status": "12"}},
	{"ib-completion-error", "2.28", "v2.28.9-1 src/transport/net_ib.cc:2543",
		warn(28, "transport/net_ib.cc:2543", "NET/IB: Got completion from peer 10.12.0.4<36187> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) reqSize=0 vendor_err=129 req_type=Send localGid ::ffff:10.12.0.3 remoteGid ::ffff:10.12.0.4 hca mlx5_3"),
		map[string]string{"status": "12"}},
	{"ib-completion-error", "2.28-2.30", "v2.28.9-1 src/transport/net_ib.cc:3189 (GIN)",
		warn(28, "transport/net_ib.cc:3189", "NET/IB/GIN: Got completion from peer 10.12.0.4<36187> with status=5 opcode=0 len=0 vendor err 249 (Send) localGid ::ffff:10.12.0.3 remoteGid ::ffff:10.12.0.4 hca mlx5_3"),
		map[string]string{"status": "5"}},
	{"ib-completion-error", "2.29-2.30", "v2.30.7-1 src/transport/net_ib/p2p.cc:688",
		warnFunc("transport/net_ib/p2p.cc:688", "ncclIbTest", "NET/IB: Got completion from peer 10.12.0.4<36187> with status=IBV_WC_REM_ACCESS_ERR(10) opcode=IBV_WC_RDMA_WRITE(1) vendor_err=136 localGid ::ffff:10.12.0.3 remoteGid ::ffff:10.12.0.4 hca mlx5_3"),
		map[string]string{"peer": "10.12.0.4<36187>", "status": "10"}},
	{"roce-gid", "2.4-2.18", "v2.17.1-1 src/misc/ibvwrap.cc:174 (IBV_INT_CHECK_RET_ERRNO)",
		warn(12, "misc/ibvwrap.cc:174", "Call to ibv_modify_qp failed with error Invalid argument"), map[string]string{"error": "Invalid argument"}},
	{"roce-gid", "2.19-2.23", "v2.19.4-1 src/misc/ibvwrap.cc:71 (errno appended)",
		warn(19, "misc/ibvwrap.cc:71", "Call to ibv_modify_qp failed with error Network is unreachable errno 101"), nil},
	{"roce-gid", "2.24-2.30", "v2.30.7-1 src/misc/ibvwrap.cc:376 + ibvModifyQpLog",
		warn(27, "misc/ibvwrap.cc:376", "Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_2:1, curr state INIT, next state RTR, local GID index 3, local GID ::ffff:10.12.0.3, remote GID ::ffff:10.12.0.4"),
		map[string]string{"device": "mlx5_2:1", "gid_index": "3"}},
	{"ib-memlock", "2.4-2.12", "v2.12.12-1 src/misc/ibvwrap.cc:162 (IBV_PTR_CHECK, no error text)",
		warn(5, "misc/ibvwrap.cc:162", "Call to ibv_reg_mr failed"), map[string]string{"call": "ibv_reg_mr"}},
	{"ib-memlock", "2.13-2.30", "v2.30.7-1 src/misc/ibvwrap.cc:42 (IBV_PTR_CHECK_ERRNO)",
		warn(22, "misc/ibvwrap.cc:42", "Call to ibv_reg_mr failed with error Cannot allocate memory"),
		map[string]string{"call": "ibv_reg_mr", "error": "Cannot allocate memory"}},
	{"ib-memlock", "2.1", "https://github.com/jade-hpc-gpu/jade-hpc-gpu.github.io/issues/43 (no NCCL before WARN)",
		"dgx-e01:14560:14560 [0] misc/ibvwrap.cu:269 WARN Call to ibv_create_qp failed", map[string]string{"call": "ibv_create_qp"}},
	{"ib-memlock", "2.4-2.13", "horovod/horovod#1651 (misc/ibvwrap.cu of 2.4)",
		warn(4, "misc/ibvwrap.cu:280", "Call to ibv_create_qp failed"), map[string]string{"call": "ibv_create_qp"}},

	// GPUs, CUDA, NVML.
	{"duplicate-gpu", "2.5-2.7", "v2.7.8-1 src/init.cc:573 (%x)",
		warn(7, "init.cc:573", "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1b000"),
		map[string]string{"rank_a": "1", "rank_b": "0", "bus_id": "1b000"}},
	{"duplicate-gpu", "2.8-2.29", "v2.29.7-1 src/init.cc:974",
		warn(29, "init.cc:974", "Duplicate GPU detected : rank 3 and rank 2 both on CUDA device 9c000"), map[string]string{"bus_id": "9c000"}},
	{"duplicate-gpu", "2.30", "v2.30.7-1 src/init.cc:1057",
		warnFunc("init.cc:1057", "initTransportsRank", "Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this feature"), nil},
	{"nccl-version-mismatch", "2.23-2.30", "v2.29.7-1 src/init.cc:966",
		warn(25, "init.cc:966", "Mismatched NCCL version detected : rank 4 version 22602 rank 0 version 22304"),
		map[string]string{"version_a": "22602", "version_b": "22304"}},
	{"gpu-oom-init", "2.0-2.3", "v2.3.7-1 src/include/core.h:375 CUDACHECK(cudaMalloc); 2.2 prefix without NCCL (https://github.com/NVIDIA/nccl-tests/issues/15)",
		"gpu-c12:18553:18612 [0] include/core.h:375 WARN Cuda failure 'out of memory'", nil},
	{"gpu-oom-init", "2.4-2.13", "v2.6.4-1 src/include/checks.h:16 (CUDACHECK)",
		warn(9, "include/alloc.h:41", "Cuda failure 'out of memory'"), nil},
	{"gpu-oom-init", "2.14-2.30", "v2.21.5-1 src/include/alloc.h:186",
		warn(21, "include/alloc.h:186", "Failed to CUDA calloc 6291456 bytes"), map[string]string{"bytes": "6291456"}},
	{"cuda-kernel-fault", "2.4-2.30", "v2.30.7-1 src/include/checks.h:18 (CUDACHECK)",
		warn(12, "enqueue.cc:1240", "Cuda failure 'an illegal memory access was encountered'"),
		map[string]string{"cuda_error": "an illegal memory access was encountered"}},
	{"cuda-kernel-fault", "2.19-2.30", "v2.29.7-1 src/include/cudawrap.h:36 (CUCHECK, with the code)",
		warn(24, "misc/strongstream.cc:406", "Cuda failure 700 'an illegal memory access was encountered'"), nil},
	{"cuda-init-failure", "2.13-2.18", "v2.13.4-1 src/include/cudawrap.h:28 (CUCHECK, no code)",
		warn(16, "misc/cudawrap.cc:33", "Cuda failure 'initialization error'"), map[string]string{"cuda_error": "initialization error"}},
	{"nvls-alloc-failure", "2.17-2.30", "v2.19.4-1 src/transport/nvls.cc:88 + src/include/cudawrap.h (CUCHECK)",
		warn(26, "transport/nvls.cc:88", "Cuda failure 1 'invalid argument'"), map[string]string{"cuda_error": "invalid argument"}},
	{"nvls-alloc-failure", "2.30", "v2.30.7-1 src/include/cudawrap.h:37 with the function name",
		warnFunc("transport/nvls.cc:171", "nvlsGroupCreate", "Cuda failure 2 'out of memory'"), map[string]string{"cuda_error": "out of memory"}},
	{"nvml-gpu-not-visible", "2.1", "https://github.com/NVIDIA/nccl-tests/issues/10 (misc/nvmlwrap.cu, no NCCL before WARN, in a container)",
		"node4:1854:1889 [7] misc/nvmlwrap.cu:170 WARN nvmlDeviceSetCpuAffinity() failed: Unknown Error",
		map[string]string{"call": "nvmlDeviceSetCpuAffinity", "error": "Unknown Error"}},
	{"nvml-gpu-not-visible", "2.4-2.11", "v2.11.4-1 src/misc/nvmlwrap.cc:134 (trailing space)",
		warn(8, "misc/nvmlwrap.cc:134", "nvmlDeviceGetHandleByPciBusId() failed: Not Found "),
		map[string]string{"call": "nvmlDeviceGetHandleByPciBusId"}},
	{"nvml-gpu-not-visible", "2.4-2.11", "v2.11.4-1 src/include/nvmlwrap.h:28 (NVMLCHECK)",
		warn(10, "include/nvmlwrap.h:28", "NVML failure 'Insufficient Permissions'"), map[string]string{"error": "Insufficient Permissions"}},
	{"nvml-gpu-not-visible", "2.12-2.30", "v2.30.7-1 src/misc/nvmlwrap.cc:166",
		warn(30, "misc/nvmlwrap.cc:166", "nvmlDeviceGetHandleByIndex(2) failed: Unknown Error"), map[string]string{"call": "nvmlDeviceGetHandleByIndex"}},
	{"p2p-disabled-nvlink", "2.12-2.30", "v2.29.7-1 src/graph/paths.cc:360",
		warn(20, "graph/paths.cc:360", "P2P is disabled between NVLINK connected GPUs 1 and 6. This should not be the case given their connectivity, and is probably due to a hardware issue. If you still want to proceed, you can set NCCL_IGNORE_DISABLED_P2P=1."),
		map[string]string{"gpu_a": "1", "gpu_b": "6"}},

	// The return code as NCCL names it (ncclGetErrorString, src/init.cc)
	// and as PyTorch and nccl-tests wrap it.
	{"nccl-unhandled-system-error", "torch 1.0-1.3, NCCL 2.3-2.4", "https://github.com/NVIDIA/nccl/issues/207 (C10D_NCCL_CHECK without the version)",
		"RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:260, unhandled system error", nil},
	{"nccl-internal-error", "torch 1.0-1.3", "same C10D_NCCL_CHECK as nccl#207; NCCL v2.4.8-1 src/init.cc 'internal error'",
		"RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1565272279342/work/torch/lib/c10d/ProcessGroupNCCL.cpp:272, internal error", nil},
	{"nccl-internal-error", "torch 1.4+, NCCL 2.4-2.17", "torch/lib/c10d/NCCLUtils.hpp (ncclGetErrorWithVersion); NCCL v2.17.1-1 src/init.cc",
		"RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:825, internal error, NCCL version 2.7.8", nil},
	{"nccl-internal-error", "NCCL 2.18-2.30", "v2.30.7-1 src/init.cc:3424",
		"torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, internal error - please report this issue to the NCCL developers, NCCL version 2.21.5", nil},
	{"nccl-internal-error", "Horovod/TensorFlow, NCCL 2.4-2.17", "https://github.com/horovod/horovod/issues/2113 ('ncclCommInitRank failed: internal error')",
		"tensorflow.python.framework.errors_impl.UnknownError: ncclCommInitRank failed: internal error", nil},
	{"nccl-invalid-usage", "XLA/JAX, NCCL 2.4-2.17", "XLA nccl_utils 'NCCL operation %s failed: %s' wording of https://github.com/NVIDIA/nccl/issues/1382 with the pre-2.18 string",
		"INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:305: NCCL operation ncclGroupEnd() failed: invalid usage. Last NCCL warning(error) log entry (may be unrelated) 'Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000'.", nil},
	{"nccl-internal-error", "nccl-tests, NCCL 2.4-2.17", "nccl-tests src/common.h NCCLCHECK ('%s / %s'); NCCL v2.17.1-1 src/init.cc",
		"node2: Test NCCL failure common.cu:891 'internal error / '", nil},
	{"nccl-invalid-usage", "torch 1.4+, NCCL 2.4-2.17", "torch/lib/c10d/NCCLUtils.hpp; NCCL v2.17.1-1 src/init.cc",
		"RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, invalid usage, NCCL version 2.10.3", nil},
	{"nccl-invalid-usage", "torch 1.0-1.3", "same C10D_NCCL_CHECK as nccl#207",
		"RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:290, invalid usage", nil},
	{"nccl-invalid-usage", "torch 2.x", "torch/csrc/distributed/c10d/NCCLUtils.cpp getNcclErrorDetailStr",
		"ncclInvalidUsage: This usually reflects invalid usage of NCCL library.", nil},
	{"nccl-invalid-argument", "nccl-tests, NCCL 2.4-2.17", "nccl-tests src/common.h; NCCL v2.17.1-1 src/init.cc",
		"gpu3: Test NCCL failure common.cu:1004 'invalid argument'", nil},
	{"nccl-invalid-argument", "NCCL 2.18-2.30", "v2.30.7-1 src/init.cc:3426",
		"RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:121, invalid argument (run with NCCL_DEBUG=WARN for details), NCCL version 2.19.3", nil},
	{"nccl-unhandled-system-error", "NCCL 2.18-2.30", "v2.30.7-1 src/init.cc:3422",
		"torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5", nil},
	{"nccl-unhandled-system-error", "torch 1.11+", "torch/csrc/distributed/c10d/NCCLUtils.cpp getNcclErrorDetailStr",
		"ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ", nil},
	{"nccl-unhandled-system-error", "torch 1.10-1.11", "https://github.com/NVIDIA/nccl/issues/834 (older getNcclErrorDetailStr text)",
		"ncclSystemError: System call (socket, malloc, munmap, etc) failed.", nil},
	{"nccl-unhandled-system-error", "torch 2.x with NCCL < 2.13", "torch NCCLUtils.cpp getNcclErrorDetailStr without NCCL_REMOTE_ERROR",
		"ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. It can be also caused by unexpected exit of a remote peer.", nil},
	{"nccl-invalid-usage", "torch 1.10-1.13", "older getNcclErrorDetailStr text, quoted in a dist_train.sh note found by code search",
		"ncclInvalidUsage: This usually reflects invalid usage of NCCL library (such as too many async ops, too many collectives at once, mixing streams in a group, etc).", nil},
	{"nccl-invalid-argument", "torch 1.11-2.9", "torch NCCLUtils.cpp getNcclErrorDetailStr",
		"ncclInvalidArgument: Invalid value for an argument.", nil},
	{"nccl-unhandled-cuda-error", "NCCL 2.4-2.17", "v2.17.1-1 src/init.cc",
		"RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:514, unhandled cuda error, NCCL version 2.4.8", nil},
	{"nccl-remote-error", "NCCL 2.13-2.30", "v2.29.7-1 src/init.cc; torch NCCLUtils.cpp getNcclErrorDetailStr",
		"torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2006, remote process exited or there was a network error, NCCL version 2.21.5", nil},

	// PyTorch watchdog and teardown.
	{"watchdog-timeout", "torch 1.8-1.9 (NCCL_BLOCKING_WAIT)", "torch/lib/c10d/ProcessGroupNCCL.cpp synchronizeInternal and operator<< (stored copy with TensorShape)",
		"RuntimeError: [Rank 1] Caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, TensorShape=[25557032], Timeout(ms)=1800000) ran for 1800327 milliseconds before timing out.",
		map[string]string{"op": "ALLREDUCE", "timeout_ms": "1800000", "ran_ms": "1800327"}},
	{"watchdog-timeout", "torch 1.8-1.9", "https://github.com/WongKinYiu/yolov9/issues/539",
		"  what():  [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800910 milliseconds before timing out.",
		map[string]string{"op": "BROADCAST"}},
	{"watchdog-timeout", "torch 1.10-2.1", "https://github.com/pytorch/pytorch/issues/118369",
		"[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4411, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800694 milliseconds before timing out.",
		map[string]string{"seq": "4411", "op": "ALLREDUCE"}},
	{"watchdog-timeout", "torch 2.2-2.9", "https://github.com/hiyouga/LlamaFactory/issues/7396",
		"[rank3]:[E1104 09:41:27.118204113 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=912, OpType=_ALLGATHER_BASE, NumelIn=131072, NumelOut=1048576, Timeout(ms)=600000) ran for 600018 milliseconds before timing out.",
		map[string]string{"seq": "912", "op": "_ALLGATHER_BASE", "numel_in": "131072", "numel_out": "1048576"}},
	// ProcessGroupWrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL) checks each
	// collective's fingerprint across ranks before running it.
	{"collective-desync", "torch 1.x", "https://github.com/pytorch/pytorch/pull/79901 (ProcessGroupWrapper.cpp, fingerprint without SequenceNumber)",
		"RuntimeError: Detected mismatch between collectives on ranks. Rank 2 is running collective: CollectiveFingerPrint(OpType=ALLGATHER, TensorShape=[64, 8], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda)), but Rank 0 is running collective: CollectiveFingerPrint(OpType=BROADCAST).",
		map[string]string{"rank": "2", "op": "ALLGATHER"}},
	{"collective-desync", "torch 2.x", "https://github.com/pytorch/pytorch/pull/100214 (ProcessGroupWrapper.cpp, SequenceNumber in the fingerprint)",
		"[rank5]: RuntimeError: Detected mismatch between collectives on ranks. Rank 5 is running collective: CollectiveFingerPrint(SequenceNumber=2207, OpType=REDUCE_SCATTER, TensorShape=[4194304], TensorDtypes=BFloat16), but Rank 4 is running collective: CollectiveFingerPrint(SequenceNumber=2207, OpType=ALLREDUCE, TensorShape=[4194304], TensorDtypes=BFloat16).",
		map[string]string{"rank": "5", "seq": "2207", "op": "REDUCE_SCATTER"}},
	{"watchdog-seq-status", "torch 2.2", "https://github.com/hiyouga/LlamaFactory/issues/7396",
		"[rank0]:[E1104 09:41:31.449400920 ProcessGroupNCCL.cpp:1709] [PG 1 Rank 0] Timeout at NCCL work: 912, last enqueued NCCL work: 914, last completed NCCL work: 911.",
		map[string]string{"timeout_seq": "912", "last_enqueued": "914", "last_completed": "911"}},
	{"watchdog-seq-status", "torch 2.3-2.9", "https://github.com/XPixelGroup/BasicSR/issues/737",
		"[rank1]:[E1104 09:41:27.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at work: 912, last enqueued NCCL work: 915, last completed NCCL work: 911.",
		map[string]string{"timeout_seq": "912"}},
	{"watchdog-seq-status", "torch 2.5-2.9", "https://github.com/hiyouga/LlamaFactory/issues/8261 (dump signal, capitalised 'Last enqueued')",
		"[rank1]:[E602 11:17:52.557891708 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 1] Received a dump signal due to a collective timeout from this local rank and we will try our best to dump the debug info. Last enqueued NCCL work: 6, last completed NCCL work: 6.This is most likely caused by incorrect usages of collectives",
		map[string]string{"last_enqueued": "6", "last_completed": "6"}},
	{"nccl-async-teardown", "torch 1.8-1.13", "torch/lib/c10d/ProcessGroupNCCL.cpp WorkNCCL::handleNCCLGuard (stored copy); https://github.com/WongKinYiu/yolov9/issues/539",
		"[E ProcessGroupNCCL.cpp:361] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid this inconsistency, we are taking the entire process down.", nil},
	{"nccl-async-teardown", "torch 1.x", "torch/lib/c10d/NCCLUtils.hpp NCCLComm::getNcclComm (stored copy)",
		"RuntimeError: NCCL communicator was aborted.", nil},
	{"nccl-async-teardown", "torch 1.12-2.9", "torch NCCLUtils getNcclComm with the rank",
		"torch.distributed.DistBackendError: NCCL communicator was aborted on rank 3.  Original reason for failure was: [Rank 3] Watchdog caught collective operation timeout", map[string]string{"rank": "3"}},
	{"nccl-async-teardown", "torch 2.0-2.1", "https://github.com/pytorch/pytorch/issues/118369",
		"[E ProcessGroupNCCL.cpp:1182] [Rank 2] NCCL watchdog thread terminated with exception: [Rank 2] Watchdog caught collective operation timeout", nil},
	{"nccl-async-teardown", "torch 2.2-2.9", "https://github.com/hiyouga/LlamaFactory/issues/7396",
		"[rank0]:[E1104 09:41:31.450685507 ProcessGroupNCCL.cpp:1515] [PG 1 Rank 0] Process group watchdog thread terminated with exception: [Rank 0] Watchdog caught collective operation timeout", nil},
	{"heartbeat-monitor", "torch 2.2", "torch ProcessGroupNCCL.cpp heartbeatMonitor (~2.2 copy)",
		"[rank5]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 5] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=2", nil},
	{"heartbeat-monitor", "torch 2.3-2.9", "torch ProcessGroupNCCL.cpp heartbeatMonitor (~2.8 copy)",
		"[rank5]:[F1104 10:02:11.522087731 ProcessGroupNCCL.cpp:1575] [PG ID 0 PG GUID 0(default_pg) Rank 5] [PG ID 0 PG GUID 0(default_pg) Rank 5] Terminating the process after attempting to dump debug info, due to ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives.",
		map[string]string{"seconds": "480"}},
}

// notWordings are lines a release prints that must not fire the
// signature: 2.30 demoted the socketFinalizeAccept mismatch to INFO (it
// discards the stray connection and carries on), and 2.24+ log each
// ibv_modify_qp retry at INFO before the final WARN.
var notWordings = []wording{
	{"bootstrap-mismatch", "2.30", "v2.30.7-1 src/misc/socket.cc:380 (INFO)",
		"dgx-b07:7731:7790 [3] NCCL INFO socketFinalizeAccept from 10.0.0.5<55002>: wrong socket type (peer 4 != expected 3 -- peer connected to wrong NCCL socket), discarding peer connection", nil},
	{"roce-gid", "2.24-2.30", "v2.30.7-1 src/misc/ibvwrap.cc:366 (INFO)",
		"gpu-n27:4027:4127 [1] NCCL INFO Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_2:1, curr state INIT, next state RTR, local GID index 3, local GID ::ffff:10.12.0.3, remote GID ::ffff:10.12.0.4, retrying 1/7 after 1000 msec of sleep", nil},
}

// TestWordingsAcrossReleases checks every release's wording of every
// signature listed above: the signature's pattern matches it, names the
// expected fields, and the explainer diagnoses the line alone (so the
// prefilter's literals cover the wording too).
func TestWordingsAcrossReleases(t *testing.T) {
	e := testExplainer(t)
	for _, w := range wordings {
		name := w.sig + " " + w.releases + " " + w.source
		s := e.byID[w.sig]
		if s == nil {
			t.Errorf("%s: no such signature", name)
			continue
		}
		m := s.Re.FindStringSubmatch(w.line)
		if m == nil {
			t.Errorf("%s: pattern does not match %q", name, w.line)
			continue
		}
		got := map[string]string{}
		for i, f := range s.Fields {
			if i+1 < len(m) && m[i+1] != "" {
				if _, ok := got[f]; !ok {
					got[f] = m[i+1]
				}
			}
		}
		for k, v := range w.fields {
			if got[k] != v {
				t.Errorf("%s: field %s = %q, want %q (all %v)", name, k, got[k], v, got)
			}
		}
		r := analyze(t, e, w.line+"\n")
		if !explained(e, r, s, w.line) {
			t.Errorf("%s: line not diagnosed as %s: %q\n  diagnoses %v notes %v", name, w.sig, w.line, diagIDs(r), noteIDs(r))
		}
	}
	for _, w := range notWordings {
		r := analyze(t, e, w.line+"\n")
		for _, id := range append(diagIDs(r), noteIDs(r)...) {
			if id == w.sig {
				t.Errorf("%s %s (%s): %q diagnosed as %s", w.sig, w.releases, w.source, w.line, id)
			}
		}
	}
}

// TestWordingsCoverSignatures keeps the table honest: every signature
// with NCCL or PyTorch wording has at least one row.
func TestWordingsCoverSignatures(t *testing.T) {
	// Signatures whose text is not NCCL's or PyTorch's own: kernel and
	// launcher messages, CUDA strings, other libraries.
	notNCCL := map[string]bool{
		"shm-sigbus": true, "gpu-xid": true, "fd-exhaustion": true, "torchrun-child-failed": true,
		"accelerate-rtx40": true, "master-port-in-use": true, "store-rendezvous-timeout": true,
		"fabric-manager-not-ready": true, "barrier-device-unknown": true, "deprecated-env-name": true,
		"p2p-hang-acs-iommu": true, idUnrecognisedWarn: true,
	}
	have := map[string]bool{}
	for _, w := range wordings {
		have[w.sig] = true
	}
	e := testExplainer(t)
	for _, s := range e.sigs {
		if s.Re == nil {
			continue // a catalogue cause: the catalogue finds its lines
		}
		if !have[s.ID] && !notNCCL[s.ID] {
			t.Errorf("%s: no release wordings in wordings_test.go", s.ID)
		}
	}
}

// A WARN in the NCCL 2.0-2.2 format (no "NCCL" before it) that is not in
// the catalogue is still placed by its source file (shape of
// https://github.com/horovod/horovod/issues/610; values ours).
func TestOldFormatUnrecognisedWarn(t *testing.T) {
	r := analyze(t, testExplainer(t), "node7:2201:2265 [1] transport/p2p.cu:526 WARN failed to open CUDA IPC handle : 30 unknown error\n")
	root := rootOf(r)
	if root == nil || (root.ID != idUnrecognisedWarn && root.ID != idCatalogWarning) || root.Fields["source"] != "transport/p2p.cu" {
		t.Fatalf("root = %+v", root)
	}
}
