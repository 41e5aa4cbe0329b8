package explain

import "testing"

// corpusWordings are the corpus logs of NCCL and PyTorch wordings across
// releases (issue 15, class 3): old prefixes without "NCCL", 2.4-2.8
// socket/IB/shm forms, 2.29/2.30 os/ files and the (function) prefix,
// torch 1.x wrappers and watchdog forms.
var corpusWordings = map[string]corpusCase{
	"nccl21-ibv-create-qp.log": {conf: High, rank: -2, has: []string{"nccl-unhandled-system-error"},
		check: func(t *testing.T, r *Report) {
			// NCCL 2.1 printed "host:pid:tid [dev] file:line WARN": the
			// evidence still names its host and process.
			if ev := rootOf(r).Evidence[0]; ev.Host != "gpu-a17" || ev.PID != 20817 {
				t.Errorf("evidence = %+v", ev)
			}
			if f := rootOf(r).Fields; f["call"] != "ibv_create_qp" {
				t.Errorf("fields = %v", f)
			}
		}},
	"horovod-shm-register-nccl24.log": {conf: High, rank: 2, version: "2.4.2+cuda10.0", not: []string{idUnrecognisedWarn},
		check: func(t *testing.T, r *Report) {
			if f := rootOf(r).Fields; f["cuda_error"] != "invalid argument" || f["cuda_code"] != "1" {
				t.Errorf("fields = %v", f)
			}
		}},
	"nccl24-socket-af-inet6.log":       {conf: Low, rank: 4, version: "2.4.7+cuda10.0", check: placed("socket-connect", "include/socket.h", "")},
	"torch10-nccl237-system-error.log": {conf: Low, rank: -2, version: "2.3.7+cuda9.0"},
	"watchdog-torch1-yolov9.log":       {conf: High, rank: 1, has: []string{"nccl-async-teardown"}},
	"blocking-wait-torch18.log": {conf: High, rank: 0,
		check: func(t *testing.T, r *Report) {
			if w := rootOf(r).Watchdog; w == nil || w.OpType != "ALLREDUCE" || w.TimeoutMS != 1800000 || w.RanForMS != 1800431 {
				t.Errorf("decoded %+v", w)
			}
		}},
	"ib-completion-empty-peer-218.log": {conf: High, rank: -2, has: []string{"nccl-remote-error"}, version: "2.18.5+cuda12.0",
		check: func(t *testing.T, r *Report) {
			if f := rootOf(r).Fields; f["error"] != "4" || f["peer"] != "" {
				t.Errorf("fields = %v", f)
			}
		}},
	"roce-modify-qp-unreachable-219.log": {conf: High, rank: -2, has: []string{"proxy-failure", "nccl-unhandled-system-error"}, version: "2.19.3+cuda12.3"},
	"cuda-init-pdsh-nccl218.log": {conf: High, rank: -2, has: []string{"nccl-unhandled-cuda-error"},
		check: func(t *testing.T, r *Report) {
			if ev := rootOf(r).Evidence[0]; ev.Host != "rdma-job-worker-1" {
				t.Errorf("evidence = %+v", ev)
			}
		}},
	"ib-create-cq-nccl278.log":            {conf: High, rank: -2, has: []string{"nccl-unhandled-system-error"}, version: "2.7.8+cuda11.0"},
	"ib-reg-mr-iova2-single-node.log":     {conf: High, rank: -2, has: []string{"proxy-failure"}, version: "2.19.3+cuda12.2"},
	"heartbeat-torch23-dinov2.log":        {conf: High, rank: 0},
	"ib-completion-nccl27-nccl-tests.log": {conf: High, rank: -2, has: []string{"nccl-unhandled-system-error"}, version: "2.7.6+cuda11.0"},
	"nccl230-shm-linux-func.log": {conf: High, rank: -2, also: []string{"shm-create-failed"}, version: "2.30.3+cuda13.0",
		check: func(t *testing.T, r *Report) {
			if f := rootOf(r).Fields; f["path"] != "/dev/shm/nccl-Rk31sQ" || f["bytes"] != "9637892" {
				t.Errorf("fields = %v", f)
			}
		}},
	"nccl229-ncclos-pollconnect.log": {conf: High, rank: -2, has: []string{"nccl-unhandled-system-error"},
		check: func(t *testing.T, r *Report) {
			if f := rootOf(r).Fields; f["peer"] != "10.10.7.107<46135>" || f["error"] != "No route to host" {
				t.Errorf("fields = %v", f)
			}
		}},
	"internal-lasterror-torch20-nccl214.log": {conf: Medium, rank: -2, has: []string{"peer-closed"}, version: "2.14.3",
		check: func(t *testing.T, r *Report) {
			if f := rootOf(r).Fields; f["last_error"] != "Net : Connection closed by remote peer gpu-b17<50260>" {
				t.Errorf("fields = %v", f)
			}
		}},
	"nccl22-connect-timeout-nccl-tests.log": {conf: High, rank: -2, has: []string{"peer-closed", "nccl-unhandled-system-error"}, version: "2.2.13+cuda9.0",
		check: func(t *testing.T, r *Report) {
			if f := rootOf(r).Fields; f["error"] != "Connection timed out" {
				t.Errorf("fields = %v", f)
			}
			if ev := rootOf(r).Evidence[0]; ev.Host != "gpu-c12" || ev.PID != 18553 {
				t.Errorf("evidence = %+v", ev)
			}
		}},
	"healthy-nccl26-libibverbs-warn.log": {rank: -2, not: []string{idUnrecognisedWarn}, version: "2.6.4+cuda10.1"},
}

func TestCorpusWordings(t *testing.T) { runCorpusCases(t, corpusWordings) }
