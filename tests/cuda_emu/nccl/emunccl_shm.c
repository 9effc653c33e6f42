/* The emulated NCCL's shared segment: mapping it, the bell every waiter
 * sleeps on (a futex in the segment, so it works across processes),
 * waiting with a deadline, and telling a slow peer from a gone one.
 *
 * Liveness: each rank holds an open-file-description lock on byte `rank`
 * of the segment through its own open of it; the kernel drops the lock
 * when the process ends however it ends (also as a zombie nobody reaped),
 * so a peer whose byte is unlocked while its slot says it is live is a
 * process that died. */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "emunccl_impl.h"

int64_t emu_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void emu_ring(struct ncclComm *c)
{
	atomic_fetch_add(&c->hdr->bell, 1);
	syscall(SYS_futex, &c->hdr->bell, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

void emu_doze(struct ncclComm *c, uint32_t seen)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	syscall(SYS_futex, &c->hdr->bell, FUTEX_WAIT, seen, &ts, NULL, 0);
}

int emu_peer_alive(struct ncclComm *c, int r)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = r, .l_len = 1 };

	if (fcntl(c->fd, F_OFD_GETLK, &fl) != 0)
		return 1; /* cannot tell: assume alive, the deadline still holds */
	return fl.l_type != F_UNLCK;
}

const char *emu_peer_gone(struct ncclComm *c, int r, int check_lock, char *buf, size_t len)
{
	struct emu_slot *s = &c->slots[r];
	uint32_t st = atomic_load(&s->state);

	if (r == c->rank)
		return NULL;
	switch (st) {
	case EMU_LEFT:
		snprintf(buf, len, "rank %d left the communicator (ncclCommDestroy) before taking "
			 "part", r);
		return buf;
	case EMU_ABORTED:
		snprintf(buf, len, "rank %d aborted the communicator (ncclCommAbort)", r);
		return buf;
	case EMU_FAILED:
		snprintf(buf, len, "rank %d failed an earlier operation (see its log)", r);
		return buf;
	default:
		break;
	}
	if (check_lock && atomic_load(&s->joined) && !emu_peer_alive(c, r)) {
		snprintf(buf, len, "the process of rank %d (pid %d) is gone", r,
			 (int)atomic_load(&s->pid));
		return buf;
	}
	return NULL;
}

ncclResult_t emu_wait(struct ncclComm *c, emu_ready_fn ready, void *arg, int64_t deadline,
		      const char *what)
{
	int64_t next_probe = 0;
	char why[256];

	for (;;) {
		uint32_t seen = atomic_load(&c->hdr->bell);
		int blocker = -1, probe = 0;
		int64_t now;

		if (ready(c, arg, &blocker))
			return ncclSuccess;
		if (atomic_load(&c->aborted) || atomic_load(&c->destroyed))
			return emu_fail(ncclInvalidUsage, "emunccl: %s: %s: the communicator was %s on "
					"this rank", c->label, what, atomic_load(&c->aborted) ?
					"aborted" : "destroyed");
		now = emu_now_ms();
		if (now >= next_probe) {
			probe = 1;
			next_probe = now + 50;
		}
		for (int r = 0; r < c->nranks; r++) {
			const char *gone;

			if (blocker >= 0 && r != blocker)
				continue;
			gone = emu_peer_gone(c, r, probe, why, sizeof(why));
			/* the peer may have finished its part just before it left */
			if (gone && ready(c, arg, &blocker))
				return ncclSuccess;
			if (gone)
				return emu_fail(ncclRemoteError, "emunccl: %s: %s: %s", c->label, what,
						gone);
		}
		if (now > deadline) {
			if (blocker >= 0)
				snprintf(why, sizeof(why), "rank %d", blocker);
			else
				snprintf(why, sizeof(why), "the other ranks");
			return emu_fail(ncclSystemError, "emunccl: %s: %s: timed out after %lld ms "
					"waiting for %s (a peer is stuck, behind, or called a "
					"different operation; EMU_NCCL_TIMEOUT_MS sets the limit)",
					c->label, what, (long long)c->timeout_ms, why);
		}
		emu_doze(c, seen);
	}
}

struct round_arg {
	int ctl;
	uint64_t seq;
};

static int round_ready(struct ncclComm *c, void *arg, int *blocker)
{
	struct round_arg *a = arg;

	for (int r = 0; r < c->nranks; r++) {
		uint64_t v = a->ctl ? atomic_load(&c->slots[r].ctl_arrive) :
				      atomic_load(&c->slots[r].arrive);

		if (v < a->seq) {
			*blocker = r;
			return 0;
		}
	}
	return 1;
}

static ncclResult_t round_common(struct ncclComm *c, int ctl, int64_t deadline, const char *what)
{
	struct round_arg a = { .ctl = ctl };

	if (ctl) {
		a.seq = ++c->ctl_seq;
		atomic_store(&c->slots[c->rank].ctl_arrive, a.seq);
	} else {
		a.seq = ++c->bar_seq;
		atomic_store(&c->slots[c->rank].arrive, a.seq);
	}
	emu_ring(c);
	return emu_wait(c, round_ready, &a, deadline, what);
}

ncclResult_t emu_round(struct ncclComm *c, int64_t deadline, const char *what)
{
	return round_common(c, 0, deadline, what);
}

ncclResult_t emu_ctl_round(struct ncclComm *c, int64_t deadline, const char *what)
{
	return round_common(c, 1, deadline, what);
}

static size_t align_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

ncclResult_t emu_shm_attach(struct ncclComm *c, int nranks)
{
	size_t n = (size_t)nranks, slots, data, boxes, rings, total;
	struct emu_hdr *h;
	struct stat sb;
	void *m;
	int32_t expect = 0;

	c->fd = shm_open(c->id.name, O_RDWR | O_CLOEXEC, 0);
	if (c->fd < 0) {
		if (errno == ENOENT)
			return emu_fail(ncclInvalidUsage, "emunccl: rank %d: the unique id names "
					"shared memory %s that does not exist (any more): the id "
					"is stale (its communicator was already set up; make a new "
					"id with ncclGetUniqueId for every communicator) or comes "
					"from another machine", c->rank, c->id.name);
		return emu_fail(ncclSystemError, "emunccl: rank %d: opening shared memory %s: %s",
				c->rank, c->id.name, strerror(errno));
	}
	m = mmap(NULL, EMU_HDR_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
	if (m == MAP_FAILED)
		return emu_fail(ncclSystemError, "emunccl: rank %d: mapping %s: %s", c->rank,
				c->id.name, strerror(errno));
	h = m;
	if (h->magic != EMU_MAGIC) {
		munmap(m, EMU_HDR_BYTES);
		return emu_fail(ncclInvalidUsage, "emunccl: rank %d: %s is not an emulated NCCL "
				"communicator", c->rank, c->id.name);
	}
	if (!atomic_compare_exchange_strong(&h->nranks, &expect, nranks) && expect != nranks) {
		munmap(m, EMU_HDR_BYTES);
		return emu_fail(ncclInvalidUsage, "emunccl: rank %d was told the communicator has "
				"%d ranks, but a rank that joined before was told %d: every rank "
				"must pass the same nranks", c->rank, nranks, (int)expect);
	}
	slots = align_up(n * sizeof(struct emu_slot), 4096);
	data = n * h->chunk_bytes;
	boxes = align_up(n * n * sizeof(struct emu_mbox), 4096);
	rings = n * n * h->mbox_bytes;
	total = EMU_HDR_BYTES + slots + data + boxes + rings;
	munmap(m, EMU_HDR_BYTES);
	/* every rank grows it to the same size; the new bytes read as zero */
	if (fstat(c->fd, &sb) != 0 || ((size_t)sb.st_size < total && ftruncate(c->fd, (off_t)total)))
		return emu_fail(ncclSystemError, "emunccl: rank %d: sizing shared memory %s to %zu "
				"bytes: %s (is /dev/shm full?)", c->rank, c->id.name, total,
				strerror(errno));
	m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
	if (m == MAP_FAILED)
		return emu_fail(ncclSystemError, "emunccl: rank %d: mapping %zu bytes of %s: %s",
				c->rank, total, c->id.name, strerror(errno));
	c->base = m;
	c->bytes = total;
	c->hdr = m;
	c->slots = (struct emu_slot *)((char *)m + EMU_HDR_BYTES);
	c->data = (char *)m + EMU_HDR_BYTES + slots;
	c->mbox = (struct emu_mbox *)(c->data + data);
	c->rings = (char *)c->mbox + boxes;
	return ncclSuccess;
}

void emu_shm_detach(struct ncclComm *c)
{
	if (c->base)
		munmap(c->base, c->bytes);
	c->base = NULL;
	if (c->fd >= 0)
		close(c->fd); /* drops the liveness lock */
	c->fd = -1;
}
