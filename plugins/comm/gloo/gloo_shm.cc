/* Collectives through shared memory for the ranks of a communicator that
 * share a host. Gloo's tcp transport moves every byte through the kernel's
 * loopback (a copy into a socket buffer and one out of it, on each side),
 * which on one machine is the slow part of a collective; here each rank
 * copies its data once into its own slot of a segment every rank maps,
 * and reads what it needs from the others' slots.
 *
 * A collective runs in pieces of at most one slot. Each rank publishes
 * three counters, each on its own cache line: `arrive` (its slot holds
 * this piece), `reduced` (its share of an all-reduce piece is reduced, in
 * its slot) and `done` (it has finished reading the other slots). A rank
 * writes its slot only after every rank's `done` says the previous piece
 * was read. A waiter spins for a few microseconds, then sleeps on the
 * counter's futex; a publisher wakes the futex only when someone sleeps.
 *
 * What a collective is (op, sequence number, dtype, count, root, redop) is
 * written beside the counters before its first piece arrives, and every
 * rank compares all of them: ranks that called different collectives fail
 * at once, and the process group's ledger names the difference.
 *
 * A rank's comm thread holds a robust process-shared mutex for its life,
 * so a rank that died (SIGKILL included) is noticed within a wait slice
 * (50 ms) instead of at the deadline.
 *
 * A wait that ends badly throws: gloo::IoException at the deadline or on
 * abort (as Gloo's own waits do), StatusError(WEFT_ERR_COMM) for a dead
 * rank or a mismatch, whose message already says what to do.
 *
 * The segment is created by rank 0 under a random name, opened by the
 * others (a rank that cannot open it is on another host, or in another IPC
 * namespace), and unlinked as soon as every rank has answered; the ranks
 * agree through the store, so either all of them use it or none does. */
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gloo/common/error.h>

#include "gloo_impl.h"

namespace weft_gloo {

namespace {

using clk = std::chrono::steady_clock;

constexpr uint64_t kMagic = 0x776566742d73686dull; /* "weft-shm" */
constexpr size_t kPage = 4096;
constexpr int64_t kSliceMs = 50;      /* liveness check period while asleep */
constexpr int64_t kSpinNs = 20000;    /* spin this long before sleeping */

struct Desc {
	uint64_t seq;
	int64_t count;
	int32_t op;
	int32_t dtype;
	int32_t root;
	int32_t redop;
};

/* One rank's line of the control block. */
struct alignas(128) RankCtl {
	std::atomic<uint32_t> arrive;
	std::atomic<uint32_t> reduced;
	std::atomic<uint32_t> done;
	std::atomic<uint32_t> waiters; /* peers asleep on one of the words above */
	std::atomic<uint32_t> dead;    /* set by the first peer that found it dead */
	uint32_t pad;
	Desc desc;
	pthread_mutex_t alive; /* robust, process-shared: held by its comm thread */
};

struct Header {
	uint64_t magic;
	uint8_t token[16];
	int32_t size;
	int32_t pad;
	uint64_t slot_bytes;
	uint64_t slots_offset;
};

static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be plain words");

size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

long futex(std::atomic<uint32_t> *word, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), op, val, ts, nullptr, 0);
}

void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* a >= b for counters that wrap */
bool reached(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) >= 0;
}

std::string desc_str(const Desc &d)
{
	char buf[160];

	snprintf(buf, sizeof(buf), "%s #%llu (%s x %lld)", op_name((Op)d.op),
		 (unsigned long long)d.seq, weft_comm_dtype_name((weft_comm_dtype)d.dtype),
		 (long long)d.count);
	return buf;
}

std::string hex(const uint8_t *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	std::string s;

	for (size_t i = 0; i < n; i++) {
		s += digits[p[i] >> 4];
		s += digits[p[i] & 15];
	}
	return s;
}

/* Store helpers under "<comm name>/shm/". */
void store_set(const weft_store *st, const std::string &key, const std::string &val)
{
	weft_status s = st->set(st->ctx, key.c_str(), val.data(), val.size());

	if (s)
		throw StatusError(s, std::string("store: ") + host->error_last());
}

std::string store_get(const weft_store *st, const std::string &key, int64_t timeout_ms)
{
	void *v = nullptr;
	size_t len = 0;
	weft_status s = st->get(st->ctx, key.c_str(), timeout_ms, &v, &len);

	if (s)
		throw StatusError(s, std::string("store: ") + host->error_last());
	std::string out((const char *)v, len);
	st->release(st->ctx, v);
	return out;
}

/* What a collective is, as every rank compares it. */
Desc make_desc(const weft_comm_work *w, int64_t count)
{
	Desc d{};

	d.seq = w->seq;
	d.count = count;
	d.op = (int32_t)w->op;
	d.dtype = (int32_t)w->recv.dtype;
	d.root = w->op == Op::broadcast ? w->root : -1;
	d.redop = (w->op == Op::all_reduce || w->op == Op::reduce_scatter) ? (int32_t)w->redop : -1;
	return d;
}

}  // namespace

struct Shm::Impl {
	void *base = nullptr;
	size_t len = 0;
	Header *hdr = nullptr;
	RankCtl *ctl = nullptr;
	char *slots = nullptr;
	size_t slot_bytes = 0;
	int rank = 0;
	int size = 0;
	int64_t timeout_ms = 0;
	const std::atomic<bool> *aborted = nullptr;
	bool holding = false;
	/* what this rank has published so far */
	uint32_t pieces = 0;
	uint32_t reductions = 0;

	~Impl()
	{
		if (base) {
			munmap(base, len);
			host->mem_account(WEFT_MEM_COMM, -(int64_t)len);
		}
	}

	/* Takes over a mapping of len bytes (unmapped by the destructor) and
	 * counts it under WEFT_MEM_COMM. */
	void attach(void *p, size_t bytes, size_t slots_offset, size_t slot_size)
	{
		base = p;
		len = bytes;
		host->mem_account(WEFT_MEM_COMM, (int64_t)bytes);
		hdr = (Header *)p;
		ctl = (RankCtl *)((char *)p + kPage);
		slots = (char *)p + slots_offset;
		slot_bytes = slot_size;
	}

	char *slot(int r) const
	{
		return slots + (size_t)r * slot_bytes;
	}

	void publish(std::atomic<uint32_t> &word, uint32_t v)
	{
		word.store(v, std::memory_order_seq_cst);
		if (ctl[rank].waiters.load(std::memory_order_seq_cst) > 0)
			futex(&word, FUTEX_WAKE, INT_MAX, nullptr);
	}

	[[noreturn]] void peer_dead(int r)
	{
		throw StatusError(WEFT_ERR_COMM, "rank " + std::to_string(r) + " exited during the "
				  "collective (its process or comm thread is gone; see its log)");
	}

	/* Whether rank r's process is gone: its alive mutex was left by a dead
	 * owner. A mutex found free (the rank not started yet, or already
	 * finished with this communicator) is not a death. */
	void check_alive(int r)
	{
		if (ctl[r].dead.load(std::memory_order_acquire))
			peer_dead(r);
		int e = pthread_mutex_trylock(&ctl[r].alive);
		if (e == EOWNERDEAD) {
			ctl[r].dead.store(1, std::memory_order_release);
			pthread_mutex_consistent(&ctl[r].alive);
			pthread_mutex_unlock(&ctl[r].alive);
			peer_dead(r);
		}
		if (e == 0)
			pthread_mutex_unlock(&ctl[r].alive);
	}

	/* Waits until word (of rank r) reaches target, or throws at the
	 * deadline, on abort, or when r died. */
	void wait_for(int r, std::atomic<uint32_t> &word, uint32_t target, clk::time_point deadline,
		      const char *what)
	{
		uint32_t v = word.load(std::memory_order_acquire);

		if (reached(v, target))
			return;
		auto spin_end = clk::now() + std::chrono::nanoseconds(kSpinNs);
		while (clk::now() < spin_end) {
			for (int i = 0; i < 64; i++)
				cpu_relax();
			if (reached(word.load(std::memory_order_acquire), target))
				return;
		}
		for (;;) {
			ctl[r].waiters.fetch_add(1, std::memory_order_seq_cst);
			v = word.load(std::memory_order_seq_cst);
			if (!reached(v, target)) {
				struct timespec ts = { 0, kSliceMs * 1000000 };
				futex(&word, FUTEX_WAIT, v, &ts);
			}
			ctl[r].waiters.fetch_sub(1, std::memory_order_seq_cst);
			v = word.load(std::memory_order_acquire);
			if (reached(v, target))
				return;
			if (aborted->load(std::memory_order_relaxed))
				throw gloo::IoException("the communicator was aborted");
			check_alive(r);
			if (clk::now() >= deadline)
				throw gloo::IoException(
					"Timed out after " + std::to_string(timeout_ms) +
					" ms waiting in shared memory for rank " + std::to_string(r) +
					" (" + what + ")");
		}
	}

	void wait_all(std::atomic<uint32_t> RankCtl::*member, uint32_t target,
		      clk::time_point deadline, const char *what)
	{
		for (int r = 0; r < size; r++)
			if (r != rank)
				wait_for(r, ctl[r].*member, target, deadline, what);
	}

	/* Starts a piece: waits until every rank read the previous one out of
	 * the slots; the first piece of a collective writes its descriptor. */
	void begin_piece(bool first, const Desc &d, clk::time_point deadline)
	{
		wait_all(&RankCtl::done, pieces, deadline, "reading the previous piece");
		if (first)
			ctl[rank].desc = d;
	}

	/* Publishes this rank's arrival and waits for everyone's; on the first
	 * piece, checks that all ranks run the same collective. */
	void arrive(bool first, clk::time_point deadline)
	{
		publish(ctl[rank].arrive, pieces + 1);
		wait_all(&RankCtl::arrive, pieces + 1, deadline, "arriving");
		if (!first)
			return;
		const Desc &mine = ctl[rank].desc;
		for (int r = 0; r < size; r++) {
			const Desc &d = ctl[r].desc;
			if (r == rank || !memcmp(&d, &mine, sizeof(d)))
				continue;
			const char *fix = "; every rank must call the same collectives in the same "
					  "order";
			if (d.seq == mine.seq && d.op == mine.op && d.dtype == mine.dtype &&
			    d.count == mine.count)
				throw StatusError(WEFT_ERR_COMM,
						  "rank " + std::to_string(r) + " called " +
						  desc_str(d) + " with another " +
						  (mine.op == (int32_t)Op::broadcast ? "root" :
										  "reduction") +
						  " than this rank" + fix);
			throw StatusError(WEFT_ERR_COMM, "rank " + std::to_string(r) + " called " +
					  desc_str(d) + " where this rank called " +
					  desc_str(mine) + fix);
		}
	}

	void finish_piece()
	{
		pieces++;
		publish(ctl[rank].done, pieces);
	}

	/* Runs w over `total` units in pieces of at most `step`: per piece,
	 * fill(off, len) writes this rank's slot, then every rank arrives,
	 * then read(off, len, deadline) takes what it needs from the slots. */
	template <typename Fill, typename Read>
	void run_pieces(const weft_comm_work *w, int64_t count, size_t total, size_t step,
			Fill fill, Read read)
	{
		const auto deadline = clk::now() + std::chrono::milliseconds(timeout_ms);
		const Desc d = make_desc(w, count);

		for (size_t off = 0; off < total; off += step) {
			const size_t len = std::min(step, total - off);
			const bool first = off == 0;

			begin_piece(first, d, deadline);
			fill(off, len);
			arrive(first, deadline);
			read(off, len, deadline);
			finish_piece();
		}
	}
};

/* ---- the reductions ---------------------------------------------------- */

namespace {

/* out[i] = the reduction over r of src[r][i], in rank order, for i < n;
 * also into out2[i] when out2 is not NULL. out may be src[r] itself. */
template <typename T>
void reduce_ranks(T *out, T *out2, const T *const *src, int P, size_t n, weft_comm_redop op)
{
	constexpr size_t kBlock = 1024;
	T acc[kBlock];

	for (size_t b = 0; b < n; b += kBlock) {
		size_t m = std::min(kBlock, n - b);

		reduce_into<T>(acc, src[0] + b, src[1] + b, m, op);
		for (int r = 2; r < P; r++)
			reduce_into<T>(acc, acc, src[r] + b, m, op);
		if (op == WEFT_COMM_AVG)
			divide<T>(acc, m, P);
		memcpy(out + b, acc, m * sizeof(T));
		if (out2)
			memcpy(out2 + b, acc, m * sizeof(T));
	}
}

}  // namespace

Shm::Shm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Shm::~Shm() = default;

void Shm::hold_alive()
{
	Impl &m = *impl_;
	int e = pthread_mutex_lock(&m.ctl[m.rank].alive);

	if (e == EOWNERDEAD)
		pthread_mutex_consistent(&m.ctl[m.rank].alive);
	m.holding = e == 0 || e == EOWNERDEAD;
}

void Shm::release_alive()
{
	Impl &m = *impl_;

	if (m.holding)
		pthread_mutex_unlock(&m.ctl[m.rank].alive);
	m.holding = false;
}

size_t Shm::slot_bytes() const
{
	return impl_->slot_bytes;
}

template <typename T>
void Shm::all_reduce(const weft_comm_work *w, const T *in, T *out, size_t n, weft_comm_redop op)
{
	Impl &m = *impl_;
	const int P = m.size;
	/* each rank's share of a piece: 64-byte multiples, the last one shorter */
	auto share = [P](int r, size_t len, size_t *lo, size_t *hi) {
		size_t per = round_up((len + (size_t)P - 1) / (size_t)P, 64 / sizeof(T));
		*lo = std::min((size_t)r * per, len);
		*hi = std::min(*lo + per, len);
	};

	/* A rank's slot takes the shares the others reduce; its own share it
	 * reduces from `in` where it lies, and then holds its result there. */
	m.run_pieces(
		w, (int64_t)n, n, m.slot_bytes / sizeof(T),
		[&](size_t off, size_t len) {
			size_t lo, hi;

			for (int r = 0; r < P; r++) {
				share(r, len, &lo, &hi);
				if (r != m.rank)
					memcpy((T *)m.slot(m.rank) + lo, in + off + lo,
					       (hi - lo) * sizeof(T));
			}
		},
		[&](size_t off, size_t len, clk::time_point deadline) {
			const T *src[kMaxRanks];
			size_t lo, hi;

			share(m.rank, len, &lo, &hi);
			for (int r = 0; r < P; r++)
				src[r] = r == m.rank ? in + off + lo : (const T *)m.slot(r) + lo;
			reduce_ranks<T>(out + off + lo, (T *)m.slot(m.rank) + lo, src, P, hi - lo,
					op);
			m.reductions++;
			m.publish(m.ctl[m.rank].reduced, m.reductions);
			m.wait_all(&RankCtl::reduced, m.reductions, deadline, "reducing its share");
			for (int r = 0; r < P; r++) {
				share(r, len, &lo, &hi);
				if (r != m.rank)
					memcpy(out + off + lo, (const T *)m.slot(r) + lo,
					       (hi - lo) * sizeof(T));
			}
		});
}

template <typename T>
void Shm::reduce_scatter(const weft_comm_work *w, const T *in, T *out, size_t n,
			 weft_comm_redop op)
{
	Impl &m = *impl_;
	const int P = m.size;

	m.run_pieces(
		w, (int64_t)n, n, m.slot_bytes / sizeof(T) / (size_t)P,
		[&](size_t off, size_t len) {
			T *mine = (T *)m.slot(m.rank);
			for (int b = 0; b < P; b++)
				memcpy(mine + (size_t)b * len, in + (size_t)b * n + off,
				       len * sizeof(T));
		},
		[&](size_t off, size_t len, clk::time_point) {
			const T *src[kMaxRanks];
			for (int r = 0; r < P; r++)
				src[r] = (const T *)m.slot(r) + (size_t)m.rank * len;
			reduce_ranks<T>(out + off, (T *)nullptr, src, P, len, op);
		});
}

void Shm::all_gather(const weft_comm_work *w, const char *in, char *out, size_t bytes)
{
	Impl &m = *impl_;

	m.run_pieces(
		w, w->send.count, bytes, m.slot_bytes,
		[&](size_t off, size_t len) { memcpy(m.slot(m.rank), in + off, len); },
		[&](size_t off, size_t len, clk::time_point) {
			for (int r = 0; r < m.size; r++) {
				char *dst = out + (size_t)r * bytes + off;
				if (r != m.rank || dst != in + off)
					memcpy(dst, m.slot(r), len);
			}
		});
}

void Shm::broadcast(const weft_comm_work *w, char *buf, size_t bytes)
{
	Impl &m = *impl_;

	m.run_pieces(
		w, w->recv.count, bytes, m.slot_bytes,
		[&](size_t off, size_t len) {
			if (m.rank == w->root)
				memcpy(m.slot(w->root), buf + off, len);
		},
		[&](size_t off, size_t len, clk::time_point) {
			if (m.rank != w->root)
				memcpy(buf + off, m.slot(w->root), len);
		});
}

void Shm::barrier(const weft_comm_work *w)
{
	/* one piece of nothing: arriving is the barrier */
	impl_->run_pieces(
		w, 0, 1, 1, [](size_t, size_t) {}, [](size_t, size_t, clk::time_point) {});
}

#define WEFT_SHM_TYPES(X) X(float) X(double) X(int32_t) X(int64_t)
#define WEFT_SHM_INST(T)                                                                  \
	template void Shm::all_reduce<T>(const weft_comm_work *, const T *, T *, size_t,  \
					 weft_comm_redop);                                \
	template void Shm::reduce_scatter<T>(const weft_comm_work *, const T *, T *, size_t, \
					     weft_comm_redop);
WEFT_SHM_TYPES(WEFT_SHM_INST)
#undef WEFT_SHM_INST
#undef WEFT_SHM_TYPES

/* ---- setup --------------------------------------------------------------- */

namespace {

/* Maps a segment of len bytes from fd; nullptr on failure (errno set). */
void *map_fd(int fd, size_t len)
{
	void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	return p == MAP_FAILED ? nullptr : p;
}

size_t layout(int P, size_t slot_bytes, size_t *slots_offset)
{
	size_t ctl = round_up(sizeof(RankCtl) * (size_t)P, kPage);

	*slots_offset = kPage + ctl;
	return *slots_offset + slot_bytes * (size_t)P;
}

/* Rank 0: creates the segment `name` and initializes it; throws the reason
 * it could not (std::runtime_error), which the others are told. */
std::unique_ptr<Shm::Impl> create(const std::string &name, int P, size_t slot_bytes,
				  uint8_t token[16])
{
	size_t off, len = layout(P, slot_bytes, &off);
	auto m = std::make_unique<Shm::Impl>();
	int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);

	if (fd < 0)
		throw std::runtime_error(std::string("shm_open: ") + strerror(errno));
	/* reserve the pages now: a full /dev/shm must fail here, not with
	 * SIGBUS in the middle of a collective */
	int e = posix_fallocate(fd, 0, (off_t)len);
	void *p = e ? nullptr : map_fd(fd, len);
	if (!e && !p)
		e = errno;
	close(fd);
	if (!p) {
		shm_unlink(name.c_str());
		throw std::runtime_error(std::string(e == ENOSPC ? "/dev/shm has no room for " :
						     "cannot map ") + std::to_string(len >> 10) +
					 " KiB (" + strerror(e) + ")");
	}
	m->attach(p, len, off, slot_bytes);
	for (int r = 0; r < P; r++) {
		pthread_mutexattr_t a;
		RankCtl *c = new (&m->ctl[r]) RankCtl();

		pthread_mutexattr_init(&a);
		pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
		pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
		pthread_mutex_init(&c->alive, &a);
		pthread_mutexattr_destroy(&a);
	}
	m->hdr->size = P;
	m->hdr->slot_bytes = slot_bytes;
	m->hdr->slots_offset = off;
	memcpy(m->hdr->token, token, 16);
	std::atomic_thread_fence(std::memory_order_release);
	m->hdr->magic = kMagic;
	return m;
}

/* Other ranks: opens the segment rank 0 made and checks it is the one
 * the store names. */
std::unique_ptr<Shm::Impl> open_existing(const std::string &name, int P, size_t slot_bytes,
					 const uint8_t token[16])
{
	size_t off, len = layout(P, slot_bytes, &off);
	auto m = std::make_unique<Shm::Impl>();
	int fd = shm_open(name.c_str(), O_RDWR, 0);
	struct stat sb;

	if (fd < 0)
		throw std::runtime_error(std::string("cannot open rank 0's segment (") +
					 strerror(errno) + "): not on rank 0's host, or not in "
					 "its IPC namespace");
	if (fstat(fd, &sb) || (size_t)sb.st_size != len) {
		close(fd);
		throw std::runtime_error("rank 0's segment has another size");
	}
	void *p = map_fd(fd, len);
	int e = errno;
	close(fd);
	if (!p)
		throw std::runtime_error(std::string("cannot map rank 0's segment (") + strerror(e) +
					 ")");
	m->attach(p, len, off, slot_bytes);
	if (m->hdr->magic != kMagic || memcmp(m->hdr->token, token, 16) || m->hdr->size != P ||
	    m->hdr->slot_bytes != slot_bytes)
		throw std::runtime_error("a segment of that name is not rank 0's");
	return m;
}

}  // namespace

std::unique_ptr<Shm> Shm::setup(const weft_comm_init_args *a, ShmMode mode, size_t slot_bytes,
				const std::atomic<bool> *aborted)
{
	const int P = a->size, R = a->rank;
	const char *cname = a->name ? a->name : "world";
	const std::string prefix = std::string(cname) + "/shm/";
	const weft_store *st = a->store;
	std::unique_ptr<Impl> m;
	std::vector<std::string> answers((size_t)P); /* "ok" or why not, per rank */
	std::string mine;                            /* empty: this rank can join */
	std::string seg;                             /* rank 0: the name it made */

	if (mode == ShmMode::off)
		mine = "turned off (shm: off)";
	else if (P > kMaxRanks)
		mine = "more than " + std::to_string(kMaxRanks) + " ranks";
	if (R == 0) {
		static std::atomic<unsigned> counter{ 0 };
		uint8_t token[16];
		std::string info;

		if (mine.empty()) {
			try {
				if (getrandom(token, sizeof(token), 0) != (ssize_t)sizeof(token))
					throw std::runtime_error("getrandom failed");
				seg = "/weft-gloo-" + std::to_string(getpid()) + "-" +
				      std::to_string(counter++) + "-" + hex(token, 4);
				m = create(seg, P, slot_bytes, token);
				info = seg + " " + hex(token, 16);
			} catch (const std::exception &e) {
				mine = e.what();
				seg.clear();
			}
		}
		answers[0] = mine.empty() ? "ok" : mine;
		try {
			store_set(st, prefix + "segment", mine.empty() ? "ok " + info : "no " + mine);
		} catch (...) {
			if (!seg.empty())
				shm_unlink(seg.c_str());
			throw;
		}
	} else {
		std::string info = store_get(st, prefix + "segment", a->timeout_ms);
		char name[256], tok[33];

		answers[0] = info.compare(0, 3, "ok ") ? info.substr(std::min<size_t>(3, info.size())) :
							 "ok";
		if (answers[0] == "ok" && mine.empty()) {
			uint8_t token[16];

			if (sscanf(info.c_str() + 3, "%255s %32s", name, tok) != 2 || strlen(tok) != 32)
				mine = "rank 0's answer in the store is malformed";
			for (int i = 0; mine.empty() && i < 16; i++) {
				unsigned v;
				sscanf(tok + 2 * i, "%2x", &v);
				token[i] = (uint8_t)v;
			}
			if (mine.empty()) {
				try {
					m = open_existing(name, P, slot_bytes, token);
				} catch (const std::exception &e) {
					mine = e.what();
					m.reset();
				}
			}
		}
		answers[(size_t)R] = mine.empty() ? "ok" : mine;
		store_set(st, prefix + "answer/" + std::to_string(R), answers[(size_t)R]);
	}
	/* everyone learns everyone's answer: all use the segment or none does */
	std::string why;
	try {
		for (int r = 1; r < P; r++) {
			if (r != R)
				answers[(size_t)r] = store_get(st, prefix + "answer/" + std::to_string(r),
							       a->timeout_ms);
		}
	} catch (...) {
		if (!seg.empty())
			shm_unlink(seg.c_str());
		throw;
	}
	if (!seg.empty())
		shm_unlink(seg.c_str()); /* every rank has it mapped, or gave up */
	for (int r = 0; r < P && why.empty(); r++)
		if (answers[(size_t)r] != "ok")
			why = "rank " + std::to_string(r) + ": " + answers[(size_t)r];
	if (!why.empty()) {
		if (mode == ShmMode::on)
			throw StatusError(WEFT_ERR_UNSUPPORTED,
					  "shared memory was asked for (shm: on), but " + why +
					  "; use shm: auto to fall back to tcp");
		host->log(WEFT_LOG_DEBUG, "gloo: comm '%s' rank %d/%d: collectives over tcp, not "
			  "shared memory: %s", cname, R, P, why.c_str());
		return nullptr;
	}
	m->rank = R;
	m->size = P;
	m->timeout_ms = a->timeout_ms;
	m->aborted = aborted;
	host->log(WEFT_LOG_DEBUG, "gloo: comm '%s' rank %d/%d: collectives through shared "
		  "memory (%d x %zu KiB)", cname, R, P, P, slot_bytes >> 10);
	return std::unique_ptr<Shm>(new Shm(std::move(m)));
}

}  // namespace weft_gloo
