/* The rendezvous store's client: one blocking TCP connection, one request
 * at a time (a mutex makes it thread-safe). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist.h"
#include "dist/store_proto.h"
#include "weft/log.h"

/* The server answers TIMEOUT itself; the client gives it this much more
 * before it declares the connection dead. */
#define REPLY_GRACE_MS 5000

struct weft_store_client {
	weft_store vt; /* first: the vtable's ctx points back here */
	pthread_mutex_t lock;
	int fd;
	int broken;
	int64_t timeout_ms;
	char addr[WEFT_DIST_HOST_MAX + 16];
	uint8_t *buf;
	size_t cap;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t weft_dist_report_interval_ms(void)
{
	const char *v = getenv("WEFT_WAIT_REPORT_MS");
	long long n = v ? atoll(v) : 0;

	return n > 0 ? n : 30000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int send_all(int fd, const void *p, size_t len)
{
	const uint8_t *b = p;

	while (len) {
		ssize_t n = send(fd, b, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads exactly len bytes before deadline; 0 ok, -1 closed/error, -2 late. */
static int recv_all(int fd, void *p, size_t len, int64_t deadline)
{
	uint8_t *b = p;

	while (len) {
		int64_t left = deadline - now_ms();
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;
		int rc;

		if (left <= 0)
			return -2;
		rc = poll(&pfd, 1, left > 1000000 ? 1000000 : (int)left);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -1;
		if (rc == 0)
			continue;
		n = recv(fd, b, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

/* connect() that gives up at deadline (a blocking one waits for the
 * kernel's SYN retries, minutes, on an address that drops packets). */
static int connect_by(int fd, const struct sockaddr *sa, socklen_t len, int64_t deadline)
{
	int flags = fcntl(fd, F_GETFL), soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -1;
	if (connect(fd, sa, len) != 0) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		int64_t left;
		int rc;

		if (errno != EINPROGRESS)
			return -1;
		do {
			left = deadline - now_ms();
			if (left < 1)
				left = 1;
			rc = poll(&pfd, 1, left > 1000000 ? 1000000 : (int)left);
		} while (rc < 0 && errno == EINTR);
		if (rc == 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
			return -1;
		if (soerr) {
			errno = soerr;
			return -1;
		}
	}
	return fcntl(fd, F_SETFL, flags);
}

/* One attempt; -1 with *err set, or -2 when the name does not resolve. */
static int connect_once(const char *host, int port, int64_t deadline, int *err)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char serv[16];
	int fd = -1, rc;

	snprintf(serv, sizeof(serv), "%d", port);
	rc = getaddrinfo(host, serv, &hints, &res);
	if (rc) {
		*err = EHOSTUNREACH;
		return rc == EAI_NONAME ? -2 : -1;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0)
			continue;
		if (connect_by(fd, ai->ai_addr, ai->ai_addrlen, deadline) == 0)
			break;
		*err = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd >= 0) {
		int one = 1;

		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	return fd;
}

static weft_status vt_set(void *ctx, const char *key, const void *value, size_t len)
{
	return weft_store_set(ctx, key, value, len);
}

static weft_status vt_get(void *ctx, const char *key, int64_t timeout_ms, void **value,
			  size_t *len)
{
	return weft_store_get(ctx, key, timeout_ms, value, len);
}

static weft_status vt_add(void *ctx, const char *key, int64_t delta, int64_t *result)
{
	return weft_store_add(ctx, key, delta, result);
}

static weft_status vt_wait(void *ctx, const char *const *keys, size_t nkeys, int64_t timeout_ms)
{
	return weft_store_wait(ctx, keys, nkeys, timeout_ms);
}

static void vt_release(void *ctx, void *value)
{
	(void)ctx;
	free(value);
}

weft_status weft_store_connect(const char *host, int port, const char *secret,
			       int64_t timeout_ms, weft_store_client **out)
{
	int64_t t0 = now_ms(), deadline = t0 + (timeout_ms < 0 ? 0 : timeout_ms);
	int64_t next_report = t0 + weft_dist_report_interval_ms();
	size_t slen = secret ? strlen(secret) : 0;
	weft_store_client *c;
	uint8_t hello[STORE_MAGIC_LEN + 4], answer = 0;
	int fd = -1, err = 0, rc, wait_ms = 10;

	if (!slen || slen > STORE_SECRET_MAX)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "store: the job secret must be 1..%d "
				      "bytes, got %zu", STORE_SECRET_MAX, slen);
	for (;;) {
		/* one attempt waits no longer than the next report is due */
		fd = connect_once(host, port, deadline < next_report ? deadline : next_report,
				  &err);
		if (fd == -2)
			return weft_error_set(WEFT_ERR_CONFIG, "store: the host name '%s' does not "
					      "resolve; check MASTER_ADDR (or the node list it came "
					      "from) on this node", host);
		if (fd >= 0 || now_ms() >= deadline)
			break;
		if (now_ms() >= next_report) {
			weft_log(WEFT_LOG_WARN, "waiting for the store at %s:%d (%s), %lld s of "
				 "%lld s", host, port, strerror(err),
				 (long long)(now_ms() - t0) / 1000, (long long)timeout_ms / 1000);
			next_report += weft_dist_report_interval_ms();
		}
		sleep_ms(wait_ms);
		if (wait_ms < 200)
			wait_ms *= 2;
	}
	if (fd < 0)
		return weft_error_set(WEFT_ERR_TIMEOUT, "store: nothing answered at %s:%d within "
				      "%lld ms (%s); check that the launcher or rank 0 is "
				      "running and that MASTER_ADDR/MASTER_PORT point at it", host,
				      port, (long long)timeout_ms, strerror(err));
	memcpy(hello, STORE_MAGIC, STORE_MAGIC_LEN);
	store_put_u32(hello + STORE_MAGIC_LEN, (uint32_t)slen);
	if (send_all(fd, hello, sizeof(hello)) || send_all(fd, secret, slen))
		goto out_refused;
	rc = recv_all(fd, &answer, 1, deadline + REPLY_GRACE_MS);
	if (rc || answer != 'Y')
		goto out_refused;
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return weft_error_set(WEFT_ERR_NOMEM, "store: out of memory");
	}
	pthread_mutex_init(&c->lock, NULL);
	c->fd = fd;
	c->timeout_ms = timeout_ms;
	snprintf(c->addr, sizeof(c->addr), "%s:%d", host, port);
	c->vt = (weft_store){
		.struct_size = sizeof(weft_store),
		.ctx = c,
		.set = vt_set,
		.get = vt_get,
		.add = vt_add,
		.wait = vt_wait,
		.release = vt_release,
	};
	*out = c;
	return WEFT_OK;
out_refused:
	close(fd);
	return weft_error_set(WEFT_ERR_COMM, "store at %s:%d refused this process: its job "
			      "secret differs (another job's store may hold this port, or "
			      "WEFT_STORE_SECRET differs between the ranks)", host, port);
}

void weft_store_client_set_timeout(weft_store_client *c, int64_t timeout_ms)
{
	c->timeout_ms = timeout_ms;
}

void weft_store_client_close(weft_store_client *c)
{
	if (!c)
		return;
	close(c->fd);
	pthread_mutex_destroy(&c->lock);
	free(c->buf);
	free(c);
}

void weft_store_client_shutdown(weft_store_client *c)
{
	if (c)
		shutdown(c->fd, SHUT_RDWR);
}

const char *weft_store_client_local_addr(weft_store_client *c, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (len)
		buf[0] = 0;
	if (!c || !len || getsockname(c->fd, (struct sockaddr *)&ss, &sl) != 0 ||
	    getnameinfo((struct sockaddr *)&ss, sl, buf, (socklen_t)len, NULL, 0, NI_NUMERICHOST))
		return NULL;
	return buf;
}

const weft_store *weft_store_client_vtable(weft_store_client *c)
{
	return &c->vt;
}

/* One round trip: cmd with items; on success the reply's single item (if
 * any) is in c->buf[0..*rlen). Caller holds c->lock. `what` names the
 * request for error messages. */
static weft_status roundtrip(weft_store_client *c, uint8_t cmd, int64_t timeout_ms,
			     const void *const *items, const size_t *lens, size_t n, size_t *rlen,
			     const char *what)
{
	uint8_t head[4 + 1 + 8 + 4], rhead[4];
	size_t body = 1 + 8 + 4;
	uint32_t flen;
	int64_t deadline;
	store_item ritem;
	int rc;

	if (c->broken)
		return weft_error_set(WEFT_ERR_COMM, "store at %s: the connection broke earlier; "
				      "%s cannot be served", c->addr, what);
	if (timeout_ms < 0)
		timeout_ms = c->timeout_ms;
	for (size_t i = 0; i < n; i++)
		body += 4 + lens[i];
	if (body > STORE_FRAME_MAX)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "store: %s is %zu bytes, more than "
				      "the store's %u-byte limit", what, body, STORE_FRAME_MAX);
	store_put_u32(head, (uint32_t)body);
	head[4] = cmd;
	store_put_i64(head + 5, timeout_ms);
	store_put_u32(head + 13, (uint32_t)n);
	if (send_all(c->fd, head, sizeof(head)))
		goto out_broken;
	for (size_t i = 0; i < n; i++) {
		uint8_t l[4];

		store_put_u32(l, (uint32_t)lens[i]);
		if (send_all(c->fd, l, 4) || send_all(c->fd, items[i], lens[i]))
			goto out_broken;
	}
	deadline = now_ms() + timeout_ms + REPLY_GRACE_MS;
	rc = recv_all(c->fd, rhead, 4, deadline);
	if (rc == -2)
		goto out_silent;
	if (rc)
		goto out_broken;
	flen = store_get_u32(rhead);
	if (flen < 5 || flen > STORE_FRAME_MAX)
		goto out_broken;
	if (c->cap < flen + 1) {
		uint8_t *p = realloc(c->buf, flen + 1);

		if (!p)
			return weft_error_set(WEFT_ERR_NOMEM, "store: out of memory for a %u-byte "
					      "reply", flen);
		c->buf = p;
		c->cap = flen + 1;
	}
	rc = recv_all(c->fd, c->buf, flen, deadline);
	if (rc == -2)
		goto out_silent;
	if (rc)
		goto out_broken;
	if (c->buf[0] == STORE_R_TIMEOUT)
		return weft_error_set(WEFT_ERR_TIMEOUT, "store at %s: %s timed out after %lld ms",
				      c->addr, what, (long long)timeout_ms);
	if (c->buf[0] != STORE_R_OK)
		return weft_error_set(WEFT_ERR_INTERNAL, "store at %s: the server rejected %s as "
				      "malformed", c->addr, what);
	rc = store_parse_items(c->buf + 1, flen - 1, &ritem, 1);
	if (rc < 0)
		goto out_broken;
	*rlen = 0;
	if (rc == 1) {
		memmove(c->buf, ritem.data, ritem.len);
		*rlen = ritem.len;
	}
	return WEFT_OK;
out_silent:
	/* the connection stands but nothing answers: the process serving the
	 * store is stopped or wedged; the reply may still come, so the
	 * connection is out of step and not used again */
	c->broken = 1;
	return weft_error_set(WEFT_ERR_TIMEOUT, "store at %s: no answer to %s within %lld ms (the "
			      "process that serves it is stopped or wedged)", c->addr, what,
			      (long long)(timeout_ms + REPLY_GRACE_MS));
out_broken:
	c->broken = 1;
	return weft_error_set(WEFT_ERR_COMM, "store at %s: connection lost during %s (the "
			      "launcher or rank 0 that served it has probably exited)",
			      c->addr, what);
}

weft_status weft_store_set(weft_store_client *c, const char *key, const void *value, size_t len)
{
	const void *items[2] = { key, value };
	size_t lens[2] = { strlen(key), len }, rlen;
	char what[320];
	weft_status st;

	snprintf(what, sizeof(what), "set('%s')", key);
	pthread_mutex_lock(&c->lock);
	st = roundtrip(c, STORE_SET, -1, items, lens, 2, &rlen, what);
	pthread_mutex_unlock(&c->lock);
	return st;
}

weft_status weft_store_get(weft_store_client *c, const char *key, int64_t timeout_ms,
			   void **value, size_t *len)
{
	const void *items[1] = { key };
	size_t lens[1] = { strlen(key) }, rlen = 0;
	char what[320];
	weft_status st;

	snprintf(what, sizeof(what), "get('%s')", key);
	pthread_mutex_lock(&c->lock);
	st = roundtrip(c, STORE_GET, timeout_ms, items, lens, 1, &rlen, what);
	if (!st) {
		uint8_t *v = malloc(rlen + 1);

		if (!v) {
			st = weft_error_set(WEFT_ERR_NOMEM, "store: out of memory for %s", what);
		} else {
			memcpy(v, c->buf, rlen);
			v[rlen] = 0;
			*value = v;
			*len = rlen;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return st;
}

weft_status weft_store_add(weft_store_client *c, const char *key, int64_t delta, int64_t *result)
{
	uint8_t d[8];
	const void *items[2] = { key, d };
	size_t lens[2] = { strlen(key), 8 }, rlen = 0;
	char what[320];
	weft_status st;

	store_put_i64(d, delta);
	snprintf(what, sizeof(what), "add('%s')", key);
	pthread_mutex_lock(&c->lock);
	st = roundtrip(c, STORE_ADD, -1, items, lens, 2, &rlen, what);
	if (!st && rlen != 8)
		st = weft_error_set(WEFT_ERR_INTERNAL, "store at %s: %s got a %zu-byte answer",
				    c->addr, what, rlen);
	if (!st && result)
		*result = store_get_i64(c->buf);
	pthread_mutex_unlock(&c->lock);
	return st;
}

weft_status weft_store_wait(weft_store_client *c, const char *const *keys, size_t nkeys,
			    int64_t timeout_ms)
{
	const void *items[64];
	size_t lens[64], rlen;
	char what[400];
	weft_status st = WEFT_OK;

	/* in chunks of 64 keys, each with what is left of the deadline */
	int64_t start = now_ms(), total = timeout_ms < 0 ? c->timeout_ms : timeout_ms;

	for (size_t off = 0; off < nkeys && !st; off += 64) {
		size_t n = nkeys - off < 64 ? nkeys - off : 64;
		int64_t left = total - (now_ms() - start);

		for (size_t i = 0; i < n; i++) {
			items[i] = keys[off + i];
			lens[i] = strlen(keys[off + i]);
		}
		snprintf(what, sizeof(what), "wait for %zu key(s) from '%s'", n, keys[off]);
		pthread_mutex_lock(&c->lock);
		st = roundtrip(c, STORE_WAIT, left < 0 ? 0 : left, items, lens, n, &rlen, what);
		pthread_mutex_unlock(&c->lock);
	}
	return st;
}

weft_status weft_store_check(weft_store_client *c, const char *key, int *exists)
{
	const void *items[1] = { key };
	size_t lens[1] = { strlen(key) }, rlen = 0;
	char what[320];
	weft_status st;

	snprintf(what, sizeof(what), "check('%s')", key);
	pthread_mutex_lock(&c->lock);
	st = roundtrip(c, STORE_CHECK, 0, items, lens, 1, &rlen, what);
	if (!st)
		*exists = rlen == 1 && c->buf[0];
	pthread_mutex_unlock(&c->lock);
	return st;
}
