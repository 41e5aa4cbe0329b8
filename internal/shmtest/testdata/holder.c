/*
 * holder: holds a shared-memory segment the ways /proc/PID/fd and
 * /proc/PID/maps alone do not show, for ncclwiz's cleanup tests.
 *
 *   holder MODE PATH
 *
 * Modes:
 *   leader-map     main maps PATH, closes the fd, starts a thread and
 *                  pthread_exit()s: only /proc/PID/task/TID/maps shows it
 *   leader-fd      main opens PATH, starts a thread and pthread_exit()s
 *   thread-files   a thread unshare(CLONE_FILES)s and opens PATH: only
 *                  /proc/PID/task/TID/fd shows it
 *   scm-inflight   PATH is opened, sent over a UNIX socket with SCM_RIGHTS
 *                  and closed: it exists only in the socket's queue
 *   scm-pingpong   two processes pass PATH's fd back and forth over a
 *                  socketpair, each closing its copy once sent, so at times
 *                  the file is only in flight
 *   uring          PATH is opened, registered with an io_uring
 *                  (IORING_REGISTER_FILES, raw syscalls) and closed: only
 *                  the ring's file table holds it; /proc/PID/fd shows
 *                  anon_inode:[io_uring]
 *   opath          PATH is held by an O_PATH descriptor only: it can be
 *                  reopened through /proc/self/fd at any time, even after
 *                  it was unlinked; the kernel lease does not see it
 *   exchange       PATH is held open while a loop swaps its name with
 *                  $HOLDER_SWAP (renameat2 RENAME_EXCHANGE, every 2 ms):
 *                  an attacker racing a cleanup's last check and unlink.
 *                  "violation" if the held file ever has no name.
 *
 * It prints "ready" once the layout is in place, then waits for EOF on
 * stdin and prints "ok" if PATH is still the same file, else "violation".
 * With HOLDER_CREATE set it first creates PATH (4 KiB, last modified an
 * hour ago, so only its holder keeps it from looking orphaned).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/io_uring.h>
#include <unistd.h>

static const char *path;
static ino_t want_ino;
static dev_t want_dev;

static void die(const char *what) {
	printf("error %s: %s\n", what, strerror(errno));
	fflush(stdout);
	exit(1);
}

/* finish waits for EOF on stdin and reports whether PATH survived. */
static void finish(void) {
	char buf[256];
	while (read(0, buf, sizeof buf) > 0) {
	}
	struct stat st;
	if (stat(path, &st) != 0 || st.st_ino != want_ino || st.st_dev != want_dev) {
		printf("violation %s\n", path);
		fflush(stdout);
		exit(1);
	}
	printf("ok\n");
	fflush(stdout);
	exit(0);
}

static void ready(void) {
	printf("ready\n");
	fflush(stdout);
}

static void *waiter(void *arg) {
	(void)arg;
	finish();
	return NULL;
}

static int open_seg(void) {
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die("open");
	return fd;
}

static void *unshared_opener(void *arg) {
	(void)arg;
	if (unshare(CLONE_FILES) != 0)
		die("unshare");
	int fd = open_seg();
	(void)fd; /* in this thread's own file table only */
	ready();
	finish();
	return NULL;
}

/* try_send_fd sends fd over sock; it fails when the peer has gone. */
static int try_send_fd(int sock, int fd) {
	char data = 'x';
	struct iovec iov = {.iov_base = &data, .iov_len = 1};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof fd);
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

static void send_fd(int sock, int fd) {
	if (try_send_fd(sock, fd) != 0)
		die("sendmsg");
}

static int recv_fd(int sock) {
	char data;
	struct iovec iov = {.iov_base = &data, .iov_len = 1};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
	ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return -1;
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	if (c == NULL || c->cmsg_type != SCM_RIGHTS)
		return -1;
	int fd;
	memcpy(&fd, CMSG_DATA(c), sizeof fd);
	return fd;
}

/* pingpong leaves the fd in its socket's queue a while (only in flight
 * then), receives it, checks the file still has its name, sends it back and
 * closes its copy. */
/* PLAYER_VIOLATION is a player's exit status when the file it holds was
 * unlinked; any other ending (its peer gone at teardown) is not one. */
#define PLAYER_VIOLATION 3

static void pingpong(int sock) {
	struct timespec pause = {0, 500000}; /* 0.5 ms */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (;;) {
		nanosleep(&pause, NULL);
		int fd = recv_fd(sock);
		if (fd < 0)
			_exit(0);
		struct stat st;
		if (fstat(fd, &st) != 0 || st.st_nlink == 0) {
			printf("violation %s unlinked while held\n", path);
			fflush(stdout);
			_exit(PLAYER_VIOLATION);
		}
		/* The other player ends first at teardown: that is no violation. */
		if (try_send_fd(sock, fd) != 0)
			_exit(0);
		close(fd);
	}
}

static volatile int stop_swapping;
static volatile int swap_violation;
static int held_fd;
static const char *swap_with;

/* swapper exchanges PATH and swap_with until told to stop; it checks the
 * held file keeps a name after each swap. */
static void *swapper(void *arg) {
	(void)arg;
	struct timespec pause = {0, 2000000}; /* 2 ms */
	while (!stop_swapping) {
		syscall(SYS_renameat2, AT_FDCWD, path, AT_FDCWD, swap_with, 2 /* RENAME_EXCHANGE */);
		struct stat st;
		if (fstat(held_fd, &st) != 0 || st.st_nlink == 0)
			swap_violation = 1;
		nanosleep(&pause, NULL);
	}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: holder MODE PATH\n");
		return 2;
	}
	const char *mode = argv[1];
	path = argv[2];
	struct stat st;
	if (getenv("HOLDER_CREATE") != NULL) {
		int fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
		if (fd < 0 || ftruncate(fd, 4096) != 0)
			die("create");
		struct timespec old[2];
		clock_gettime(CLOCK_REALTIME, &old[0]);
		old[0].tv_sec -= 3600;
		old[1] = old[0];
		if (futimens(fd, old) != 0)
			die("futimens");
		close(fd);
	}
	if (stat(path, &st) != 0)
		die("stat");
	want_ino = st.st_ino;
	want_dev = st.st_dev;
	pthread_t t;

	if (strcmp(mode, "leader-map") == 0 || strcmp(mode, "leader-fd") == 0) {
		int fd = open_seg();
		if (strcmp(mode, "leader-map") == 0) {
			void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (m == MAP_FAILED)
				die("mmap");
			close(fd);
		}
		if (pthread_create(&t, NULL, waiter, NULL) != 0)
			die("pthread_create");
		ready();
		pthread_exit(NULL); /* the leader exits; the thread holds on */
	}
	if (strcmp(mode, "thread-files") == 0) {
		if (pthread_create(&t, NULL, unshared_opener, NULL) != 0)
			die("pthread_create");
		pthread_join(t, NULL);
		return 1;
	}
	if (strcmp(mode, "scm-inflight") == 0) {
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0)
			die("socketpair");
		int fd = open_seg();
		send_fd(sv[0], fd);
		close(fd); /* now only the queue of sv[1] holds the file */
		ready();
		finish();
	}
	if (strcmp(mode, "scm-pingpong") == 0) {
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
			die("socketpair");
		pid_t child = fork();
		if (child < 0)
			die("fork");
		if (child == 0) {
			close(sv[0]);
			pingpong(sv[1]);
		}
		close(sv[1]);
		int fd = open_seg();
		send_fd(sv[0], fd);
		close(fd);
		pid_t pp = fork();
		if (pp < 0)
			die("fork");
		if (pp == 0) {
			pingpong(sv[0]);
		}
		close(sv[0]);
		ready();
		/* The sockets now live only in the two players. */
		char buf[256];
		while (read(0, buf, sizeof buf) > 0) {
		}
		kill(child, SIGTERM);
		kill(pp, SIGTERM);
		int status, bad = 0;
		for (int i = 0; i < 2; i++) {
			if (wait(&status) > 0 && WIFEXITED(status) && WEXITSTATUS(status) == PLAYER_VIOLATION)
				bad = 1;
		}
		if (stat(path, &st) != 0 || st.st_ino != want_ino || st.st_dev != want_dev || bad) {
			printf("violation %s\n", path);
			return 1;
		}
		printf("ok\n");
		return 0;
	}
	if (strcmp(mode, "uring") == 0) {
		struct io_uring_params p;
		memset(&p, 0, sizeof p);
		int ring = (int)syscall(__NR_io_uring_setup, 4, &p);
		if (ring < 0)
			die("io_uring_setup");
		int fd = open_seg();
		if (syscall(__NR_io_uring_register, ring, IORING_REGISTER_FILES, &fd, 1) != 0)
			die("io_uring_register");
		close(fd); /* now only the ring's registered files hold it */
		ready();
		finish();
	}
	if (strcmp(mode, "opath") == 0) {
		int fd = open(path, O_PATH | O_CLOEXEC);
		if (fd < 0)
			die("open O_PATH");
		ready();
		finish();
	}
	if (strcmp(mode, "exchange") == 0) {
		swap_with = getenv("HOLDER_SWAP");
		if (swap_with == NULL)
			die("HOLDER_SWAP");
		held_fd = open_seg();
		if (pthread_create(&t, NULL, swapper, NULL) != 0)
			die("pthread_create");
		ready();
		char buf[256];
		while (read(0, buf, sizeof buf) > 0) {
		}
		stop_swapping = 1;
		pthread_join(t, NULL);
		struct stat st, a, b;
		int named = fstat(held_fd, &st) == 0 && st.st_nlink == 1 &&
			((stat(path, &a) == 0 && a.st_ino == st.st_ino) || (stat(swap_with, &b) == 0 && b.st_ino == st.st_ino));
		if (swap_violation || !named) {
			printf("violation %s lost its name while held\n", path);
			return 1;
		}
		printf("ok\n");
		return 0;
	}
	fprintf(stderr, "unknown mode %s\n", mode);
	return 2;
}
