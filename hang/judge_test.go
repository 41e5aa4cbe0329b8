package hang

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
)

// sample builds a rank watched for 3 s (20 reads): its main thread in
// state st (wchan w when asleep) in every read.
func sample(rank int, st, w string) RankSample {
	s := RankSample{Rank: rank, PID: 100 + rank, NSPID: 100 + rank, Reads: reads, States: [2]string{st, st},
		StateCounts: map[string]int{st: reads}, WchanCounts: map[string]int{}, Threads: 5, Wakeups: 0,
		IOKnown: true, interval: 3 * time.Second}
	if st != "R" && w != "" {
		s.Wchan = w
		s.WchanCounts[w] = reads
	}
	if st == "R" {
		s.CPUPct, s.MainCPUPct, s.RanThreads = 99, 99, 1
	}
	return s
}

func with(s RankSample, f func(*RankSample)) RankSample { f(&s); return s }

func wrote(n uint64) func(*RankSample) { return func(s *RankSample) { s.MainWrote, s.Wrote = n, n } }

const futex, nanosleep, pipe, sock = "futex_do_wait", "hrtimer_nanosleep", "anon_pipe_read", "wait_woken"

// TestJudge: the layouts the real jobs showed (torch 1.13, gloo) and the
// ones only fakes show (NCCL spinning on a GPU), each judged by comparing
// the ranks with each other.
func TestJudge(t *testing.T) {
	cases := []struct {
		name     string
		backend  string
		ss       []RankSample
		verdict  string
		suspects string
		conf     string
	}{
		{"every rank progressed (healthy, paced by sleeps)", "gloo",
			[]RankSample{with(sample(0, "S", nanosleep), wrote(600)), with(sample(1, "S", nanosleep), wrote(600)), with(sample(2, "S", futex), wrote(40))},
			VerdictNoHang, "[]", High},
		{"one rank logs, the others only compute: a collective needs them", "nccl",
			[]RankSample{with(sample(0, "R", ""), wrote(80)), sample(1, "R", ""), sample(2, "R", "")},
			VerdictNoHang, "[]", Medium},
		{"output of a shared file is not progress", "gloo",
			[]RankSample{
				with(sample(0, "S", futex), func(s *RankSample) { s.Outputs = []Output{{FD: 1, Path: "/log", Grew: true, Bytes: 90, Shared: true}} }),
				with(sample(1, "S", futex), func(s *RankSample) { s.Outputs = []Output{{FD: 1, Path: "/log", Grew: true, Bytes: 90, Shared: true}} }),
			},
			VerdictStuck, "[]", Medium},
		{"rank 1 sleeps before its all_reduce", "gloo",
			[]RankSample{sample(0, "S", futex), sample(1, "S", nanosleep), sample(2, "S", futex)},
			VerdictSuspect, "[1]", High},
		{"rank 1 spins in Python", "gloo",
			[]RankSample{sample(0, "S", futex), sample(1, "R", ""), sample(2, "S", futex)},
			VerdictSuspect, "[1]", High},
		{"rank 1 spins on a starved machine (R in every read, little CPU)", "gloo",
			[]RankSample{sample(0, "S", futex), with(sample(1, "R", ""), func(s *RankSample) { s.CPUPct, s.MainCPUPct = 12, 12 }), sample(2, "S", futex)},
			VerdictSuspect, "[1]", High},
		{"NCCL: waiting ranks spin, rank 1 asleep", "nccl",
			[]RankSample{sample(0, "R", ""), sample(1, "S", futex), sample(2, "R", "")},
			VerdictSuspect, "[1]", High},
		{"two ranks, gloo: the spinner is odd", "gloo",
			[]RankSample{sample(0, "S", futex), sample(1, "R", "")},
			VerdictSuspect, "[1]", Medium},
		{"rank 1 blocked reading a pipe", "gloo",
			[]RankSample{sample(0, "S", futex), sample(1, "S", pipe), sample(2, "S", futex)},
			VerdictSuspect, "[1]", High},
		{"rank 2 stopped", "gloo",
			[]RankSample{sample(0, "S", futex), sample(1, "S", futex), sample(2, "T", "do_signal_stop")},
			VerdictSuspect, "[2]", High},
		{"rank 1 in D", "",
			[]RankSample{sample(0, "S", futex), with(sample(1, "D", "nfs_wait"), func(s *RankSample) { s.Blocked = []int{101} })},
			VerdictSuspect, "[1]", High},
		{"rank 1 exited, the others wait", "gloo",
			[]RankSample{sample(0, "S", futex), {Rank: 1, PID: 101, Gone: true, GoneAfter: 1.2}, sample(2, "S", futex)},
			VerdictSuspect, "[1]", High},
		{"every rank exited: the job ended", "gloo",
			[]RankSample{{Rank: 0, Gone: true, GoneAfter: 1.1}, {Rank: 1, Gone: true, GoneAfter: 1.0}},
			VerdictEnded, "[]", High},
		{"rank 1 exited while the others kept working", "gloo",
			[]RankSample{with(sample(0, "S", nanosleep), wrote(300)), {Rank: 1, Gone: true, GoneAfter: 0.5}},
			VerdictNoHang, "[]", Medium},
		{"every rank waits alike", "gloo",
			[]RankSample{sample(0, "S", futex), sample(1, "S", futex), sample(2, "S", futex)},
			VerdictStuck, "[]", Medium},
		{"every rank computes, nothing written", "gloo",
			[]RankSample{sample(0, "R", ""), sample(1, "R", "")},
			VerdictBusy, "[]", Low},
		{"another user's ranks: wait channels hidden", "",
			[]RankSample{sample(0, "S", ""), sample(1, "S", ""), sample(2, "S", "")},
			VerdictStuck, "[]", Medium},
		{"missing rank: the store host polls, its clients wait", "gloo",
			[]RankSample{
				with(sample(0, "S", nanosleep), func(s *RankSample) { s.Wakeups, s.StoreHost, s.StoreKnown, s.StoreConns = 600, true, true, 1 }),
				with(sample(1, "S", sock), func(s *RankSample) { s.StoreKnown, s.StoreConns = true, 2 }),
				with(sample(2, "S", sock), func(s *RankSample) { s.StoreKnown, s.StoreConns = true, 2 }),
			},
			VerdictStuck, "[]", Medium},
		{"a store host that sleeps without waking is judged like any rank", "gloo",
			[]RankSample{
				with(sample(0, "S", nanosleep), func(s *RankSample) { s.StoreHost, s.StoreKnown = true, true }),
				with(sample(1, "S", futex), func(s *RankSample) { s.StoreKnown, s.StoreConns = true, 1 }),
				with(sample(2, "S", futex), func(s *RankSample) { s.StoreKnown, s.StoreConns = true, 1 }),
			},
			VerdictSuspect, "[0]", High},
		{"rank 1 never reached the rendezvous", "gloo",
			[]RankSample{
				with(sample(0, "S", sock), func(s *RankSample) { s.StoreKnown, s.StoreConns = true, 2 }),
				with(sample(1, "S", nanosleep), func(s *RankSample) { s.StoreKnown = true }),
				with(sample(2, "S", sock), func(s *RankSample) { s.StoreKnown, s.StoreConns = true, 2 }),
			},
			VerdictSuspect, "[1]", High},
		{"a progressing rank is never the suspect", "gloo",
			[]RankSample{with(sample(0, "R", ""), wrote(100)), sample(1, "T", "do_signal_stop")},
			VerdictSuspect, "[1]", High},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hidden := strings.Contains(tc.name, "hidden")
			jd := Judge(tc.ss, Facts{Backend: tc.backend, Hidden: hidden})
			got := fmt.Sprint(jd.Suspects)
			conf := tc.conf
			if hidden {
				conf = Low
			}
			if jd.Verdict != tc.verdict || got != tc.suspects || jd.Confidence != conf {
				t.Fatalf("verdict %s %s (%s), want %s %s (%s)\nwhy: %s\n%+v", jd.Verdict, got, jd.Confidence, tc.verdict, tc.suspects, conf, jd.Why, jd.Evidence)
			}
			if got != fmt.Sprint(Suspects(jd.Evidence)) {
				t.Errorf("suspects %s but suspect evidence names %v", got, Suspects(jd.Evidence))
			}
			if jd.Why == "" {
				t.Error("no reason given")
			}
			if (jd.Confidence != High || (jd.Verdict != VerdictNoHang && jd.Verdict != VerdictEnded)) && len(jd.Surer) == 0 {
				t.Error("not sure, and nothing says what would make it surer")
			}
		})
	}
}

// TestJudgeIsOrderFree (metamorphic): the same ranks listed in another
// order, renumbered, or with every read's count scaled get the same
// verdict and the same suspects (by their new numbers).
func TestJudgeIsOrderFree(t *testing.T) {
	base := []RankSample{sample(0, "S", futex), sample(1, "S", futex), sample(2, "S", nanosleep), sample(3, "S", futex), sample(4, "S", futex)}
	want := Judge(base, Facts{Backend: "gloo"})
	rng := rand.New(rand.NewSource(7))
	for i := 0; i < 50; i++ {
		perm := rng.Perm(len(base))
		ss := make([]RankSample, len(base))
		renum := map[int]int{}
		for k, p := range perm {
			ss[k] = base[p]
			ss[k].Rank = 10 + k
			renum[base[p].Rank] = 10 + k
		}
		got := Judge(ss, Facts{Backend: "gloo"})
		if got.Verdict != want.Verdict || fmt.Sprint(got.Suspects) != fmt.Sprint([]int{renum[2]}) {
			t.Fatalf("permutation %v: %s %v, want %s [%d]", perm, got.Verdict, got.Suspects, want.Verdict, renum[2])
		}
	}
}

// TestJudgeTolerantOfTransients: a waiting rank seen runnable in a few
// reads (woken by a signal, a timer) stays with the waiters; a verdict
// never rests on one read.
func TestJudgeTolerantOfTransients(t *testing.T) {
	blip := func(s RankSample, n int) RankSample {
		s.StateCounts = map[string]int{"S": reads - n, "R": n}
		s.WchanCounts = map[string]int{s.Wchan: reads - n}
		return s
	}
	for n := 0; n < reads/2; n++ {
		ss := []RankSample{blip(sample(0, "S", futex), n), sample(1, "S", nanosleep), blip(sample(2, "S", futex), n)}
		if jd := Judge(ss, Facts{Backend: "gloo"}); fmt.Sprint(jd.Suspects) != "[1]" {
			t.Fatalf("%d of %d reads runnable: %s %v", n, reads, jd.Verdict, jd.Suspects)
		}
	}
}

// TestJudgeWords: what the verdict says about a rank in uninterruptible
// sleep (the wait channel read as what it waits for), and where a Slurm
// job's other nodes are reached.
func TestJudgeWords(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ss    []RankSample
		f     Facts
		rank  int
		wants []string
	}{
		{"D in a vfork", []RankSample{sample(0, "S", futex), sample(1, "D", "kernel_clone"), sample(2, "S", futex)}, Facts{Backend: "gloo"}, 1,
			[]string{"uninterruptible sleep (D in 20 of 20 reads): the kernel waits on its behalf for a child it started with vfork", "(in kernel_clone)", "blocks every collective"}},
		{"D on the GPU driver", []RankSample{sample(0, "R", ""), sample(1, "D", "os_acquire_spinlock")}, Facts{Backend: "nccl"}, 1,
			[]string{"uninterruptible sleep (D in 20 of 20 reads): the kernel waits on its behalf for the NVIDIA driver (the GPU)"}},
		{"D, wait channel hidden", []RankSample{sample(0, "S", futex), sample(1, "D", "")}, Facts{Backend: "gloo"}, 1,
			[]string{"for storage, a network filesystem, a driver or the GPU"}},
		{"Slurm job on other nodes", []RankSample{sample(0, "S", futex), sample(1, "S", nanosleep)}, Facts{Backend: "gloo", WorldSize: 8, SlurmJob: "42"}, -1,
			[]string{"`srun --jobid 42 --overlap --ntasks-per-node 1 ncclwiz hang`"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jd := Judge(tc.ss, tc.f)
			text := strings.Join(jd.Surer, "\n")
			if tc.rank >= 0 {
				if fmt.Sprint(jd.Suspects) != fmt.Sprintf("[%d]", tc.rank) {
					t.Fatalf("suspects %v, want [%d]", jd.Suspects, tc.rank)
				}
				for _, e := range jd.Evidence {
					if e.Suspect {
						text = e.Text
					}
				}
			}
			for _, w := range tc.wants {
				if !strings.Contains(text, w) {
					t.Errorf("%q lacks %q", text, w)
				}
			}
		})
	}
}

// TestEnterNoteClaimsNoContainer: a network namespace ncclwiz cannot enter
// may be a container's, or one made with unshare or `ip netns` (the test
// bed's is): the note says which it may be, never that it is a container's.
// Its command finds ncclwiz where sudo's PATH would not (pipx, go install).
func TestEnterNoteClaimsNoContainer(t *testing.T) {
	note := enterNote(&host.Host{Root: t.TempDir()}, 4242, "localhost:28028", "setns needs root (CAP_SYS_ADMIN)")
	for _, want := range []string{"not asked: the job runs in another network namespace", "unshare", "`sudo nsenter -t 4242 -n \"$(command -v ncclwiz)\" hang --pid 4242`"} {
		if !strings.Contains(note, want) {
			t.Errorf("%q lacks %q", note, want)
		}
	}
	if strings.Contains(note, "(a container's)") {
		t.Errorf("%q says the namespace is a container's", note)
	}
}
