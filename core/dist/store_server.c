/* The rendezvous store's server: one thread, poll(), a hash table.
 *
 * Requests that wait (GET of a missing key, WAIT) park their client until
 * a SET/ADD makes them answerable or their deadline passes; the server then
 * answers TIMEOUT, so clients never need to guess its state.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist.h"
#include "dist/store_proto.h"
#include "weft/log.h"

#define NBUCKETS 1024
#define HELLO_TIMEOUT_MS 10000

typedef struct entry {
	struct entry *next;
	char *key;
	uint8_t *val;
	size_t len;
} entry;

typedef struct client {
	int fd;
	int authed;
	char addr[80];
	int64_t hello_deadline;
	uint8_t *in;
	size_t in_len, in_cap;
	/* a parked GET or WAIT: its payload (owned) and deadline */
	uint8_t *parked;
	size_t parked_len;
	int64_t parked_deadline;
} client;

struct weft_store_server {
	int listen_fd;
	int wake[2];
	int port;
	pthread_t thread;
	atomic_int stop;
	atomic_llong refused;
	uint8_t *secret;
	size_t secret_len;
	entry *buckets[NBUCKETS];
	client *clients;
	size_t nclients, cap_clients;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint32_t hash_key(const uint8_t *k, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ k[i]) * 16777619u;
	return h;
}

static entry *find(weft_store_server *s, const uint8_t *key, size_t len)
{
	for (entry *e = s->buckets[hash_key(key, len) % NBUCKETS]; e; e = e->next)
		if (strlen(e->key) == len && !memcmp(e->key, key, len))
			return e;
	return NULL;
}

/* Sets key to a copy of val; 0 on success, -1 out of memory. */
static int put(weft_store_server *s, const uint8_t *key, size_t klen, const uint8_t *val,
	       size_t vlen)
{
	entry *e = find(s, key, klen);
	uint8_t *copy = malloc(vlen ? vlen : 1);

	if (!copy)
		return -1;
	memcpy(copy, val, vlen);
	if (!e) {
		uint32_t b = hash_key(key, klen) % NBUCKETS;

		e = calloc(1, sizeof(*e));
		if (!e || !(e->key = malloc(klen + 1))) {
			free(e);
			free(copy);
			return -1;
		}
		memcpy(e->key, key, klen);
		e->key[klen] = '\0';
		e->next = s->buckets[b];
		s->buckets[b] = e;
	}
	free(e->val);
	e->val = copy;
	e->len = vlen;
	return 0;
}

static void send_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* the read side notices the broken connection */
		p += n;
		len -= (size_t)n;
	}
}

/* Sends a response with up to one item. */
static void reply(client *c, uint8_t status, const uint8_t *item, size_t len, int has_item)
{
	uint8_t head[13];
	size_t body = 1 + 4 + (has_item ? 4 + len : 0);

	store_put_u32(head, (uint32_t)body);
	head[4] = status;
	store_put_u32(head + 5, has_item ? 1 : 0);
	store_put_u32(head + 9, (uint32_t)len);
	send_all(c->fd, head, has_item ? 13 : 9);
	if (has_item && len)
		send_all(c->fd, item, len);
}

/* Tries to answer a GET/WAIT payload now; 1 when answered. */
static int try_answer(weft_store_server *s, client *c, const uint8_t *p, size_t len)
{
	store_item items[STORE_ITEMS_MAX];
	int n = store_parse_items(p + 9, len - 9, items, STORE_ITEMS_MAX);

	for (int i = 0; i < n; i++)
		if (!find(s, items[i].data, items[i].len))
			return 0;
	if (p[0] == STORE_GET) {
		entry *e = find(s, items[0].data, items[0].len);

		reply(c, STORE_R_OK, e->val, e->len, 1);
	} else {
		reply(c, STORE_R_OK, NULL, 0, 0);
	}
	return 1;
}

static void wake_parked(weft_store_server *s)
{
	for (size_t i = 0; i < s->nclients; i++) {
		client *c = &s->clients[i];

		if (c->parked && try_answer(s, c, c->parked, c->parked_len)) {
			free(c->parked);
			c->parked = NULL;
		}
	}
}

/* Handles one request payload p[0..len). Returns -1 to drop the client. */
static int handle(weft_store_server *s, client *c, const uint8_t *p, size_t len)
{
	store_item items[STORE_ITEMS_MAX];
	int64_t timeout;
	int n;

	if (len < 9)
		return -1;
	timeout = store_get_i64(p + 1);
	n = store_parse_items(p + 9, len - 9, items, STORE_ITEMS_MAX);
	if (n < 0)
		return -1;
	switch (p[0]) {
	case STORE_SET:
		if (n != 2)
			break;
		if (put(s, items[0].data, items[0].len, items[1].data, items[1].len))
			return -1;
		reply(c, STORE_R_OK, NULL, 0, 0);
		wake_parked(s);
		return 0;
	case STORE_ADD: {
		entry *e;
		char text[32];
		int64_t v = 0;
		uint8_t out[8];

		if (n != 2 || items[1].len != 8)
			break;
		e = find(s, items[0].data, items[0].len);
		if (e) {
			char tmp[32] = { 0 };

			memcpy(tmp, e->val, e->len < sizeof(tmp) - 1 ? e->len : sizeof(tmp) - 1);
			v = strtoll(tmp, NULL, 10);
		}
		/* a sum past int64 is refused (the client reports a rejected
		 * request), never wrapped */
		if (__builtin_add_overflow(v, store_get_i64(items[1].data), &v))
			break;
		snprintf(text, sizeof(text), "%" PRId64, v);
		if (put(s, items[0].data, items[0].len, (const uint8_t *)text, strlen(text)))
			return -1;
		store_put_i64(out, v);
		reply(c, STORE_R_OK, out, 8, 1);
		wake_parked(s);
		return 0;
	}
	case STORE_CHECK: {
		uint8_t exists;

		if (n != 1)
			break;
		exists = find(s, items[0].data, items[0].len) != NULL;
		reply(c, STORE_R_OK, &exists, 1, 1);
		return 0;
	}
	case STORE_GET:
	case STORE_WAIT:
		if ((p[0] == STORE_GET && n != 1) || n < 1)
			break;
		if (try_answer(s, c, p, len))
			return 0;
		c->parked = malloc(len);
		if (!c->parked)
			return -1;
		memcpy(c->parked, p, len);
		c->parked_len = len;
		/* a timeout past the end of time waits forever (saturates) */
		c->parked_deadline = now_ms();
		if (__builtin_add_overflow(c->parked_deadline, timeout < 0 ? 0 : timeout,
					   &c->parked_deadline))
			c->parked_deadline = INT64_MAX;
		return 0;
	}
	reply(c, STORE_R_BAD, NULL, 0, 0);
	return 0;
}

/* Consumes whole messages from c's input buffer. -1: drop the client. */
static int process_input(weft_store_server *s, client *c)
{
	size_t off = 0;
	int rc = 0;

	while (!c->parked) {
		uint8_t *p = c->in + off;
		size_t avail = c->in_len - off;

		if (!c->authed) {
			uint32_t slen;

			if (avail < STORE_MAGIC_LEN + 4)
				break;
			slen = store_get_u32(p + STORE_MAGIC_LEN);
			if (memcmp(p, STORE_MAGIC, STORE_MAGIC_LEN) || slen > STORE_SECRET_MAX) {
				weft_log(WEFT_LOG_WARN, "store: refused a client from %s: it did "
					 "not speak weft's store protocol", c->addr);
				atomic_fetch_add(&s->refused, 1);
				return -1;
			}
			if (avail < STORE_MAGIC_LEN + 4 + slen)
				break;
			if (slen != s->secret_len ||
			    !store_secret_equal(p + STORE_MAGIC_LEN + 4, s->secret, slen)) {
				uint8_t no = 'N';

				weft_log(WEFT_LOG_WARN, "store: refused a client from %s: wrong "
					 "job secret", c->addr);
				atomic_fetch_add(&s->refused, 1);
				send_all(c->fd, &no, 1);
				return -1;
			}
			{
				uint8_t yes = 'Y';

				send_all(c->fd, &yes, 1);
			}
			c->authed = 1;
			off += STORE_MAGIC_LEN + 4 + slen;
			continue;
		}
		if (avail < 4)
			break;
		{
			uint32_t flen = store_get_u32(p);

			if (flen > STORE_FRAME_MAX)
				return -1;
			if (avail < 4 + (size_t)flen)
				break;
			rc = handle(s, c, p + 4, flen);
			off += 4 + flen;
			if (rc)
				return rc;
		}
	}
	memmove(c->in, c->in + off, c->in_len - off);
	c->in_len -= off;
	return 0;
}

static void drop_client(weft_store_server *s, size_t i)
{
	client *c = &s->clients[i];

	close(c->fd);
	free(c->in);
	free(c->parked);
	s->clients[i] = s->clients[--s->nclients];
}

static void accept_client(weft_store_server *s)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd = accept(s->listen_fd, (struct sockaddr *)&ss, &sl);
	char host[64] = "?", serv[16] = "?";
	struct timeval tv = { .tv_sec = 10 };
	int one = 1;
	client *c;

	if (fd < 0)
		return;
	if (s->nclients == s->cap_clients) {
		size_t cap = s->cap_clients ? 2 * s->cap_clients : 16;
		client *nc = realloc(s->clients, cap * sizeof(*nc));

		if (!nc) {
			close(fd);
			return;
		}
		s->clients = nc;
		s->cap_clients = cap;
	}
	getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), serv, sizeof(serv),
		    NI_NUMERICHOST | NI_NUMERICSERV);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c = &s->clients[s->nclients++];
	*c = (client){ .fd = fd, .hello_deadline = now_ms() + HELLO_TIMEOUT_MS };
	snprintf(c->addr, sizeof(c->addr), "%s:%s", host, serv);
}

/* Reads what is there; -1 when the client closed or sent garbage. */
static int read_client(weft_store_server *s, client *c)
{
	ssize_t n;

	if (c->in_cap - c->in_len < 65536) {
		size_t cap = c->in_cap ? c->in_cap * 2 : 65536;
		uint8_t *p;

		if (cap > STORE_FRAME_MAX + 65536u)
			return -1;
		p = realloc(c->in, cap);
		if (!p)
			return -1;
		c->in = p;
		c->in_cap = cap;
	}
	n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0)
		return -1;
	c->in_len += (size_t)n;
	return process_input(s, c);
}

static void *serve(void *arg)
{
	weft_store_server *s = arg;
	struct pollfd *fds = NULL;
	size_t cap = 0;

	while (!atomic_load(&s->stop)) {
		int64_t now = now_ms(), next = now + 1000;
		size_t n = s->nclients + 2;
		int rc;

		if (cap < n) {
			struct pollfd *nf = realloc(fds, n * 2 * sizeof(*nf));

			if (!nf) {
				weft_log(WEFT_LOG_ERROR, "store: out of memory; stopping the server");
				break;
			}
			fds = nf;
			cap = n * 2;
		}
		fds[0] = (struct pollfd){ .fd = s->wake[0], .events = POLLIN };
		fds[1] = (struct pollfd){ .fd = s->listen_fd, .events = POLLIN };
		for (size_t i = 0; i < s->nclients; i++) {
			client *c = &s->clients[i];

			fds[i + 2] = (struct pollfd){ .fd = c->fd, .events = POLLIN };
			if (c->parked && c->parked_deadline < next)
				next = c->parked_deadline;
			if (!c->authed && c->hello_deadline < next)
				next = c->hello_deadline;
		}
		rc = poll(fds, n, next > now ? (int)(next - now) : 0);
		if (rc < 0 && errno != EINTR)
			break;
		if (fds[0].revents)
			break;
		now = now_ms();
		/* clients first (indices stay valid until a drop, which we do
		 * walking backwards); new connections after */
		for (size_t k = s->nclients; k-- > 0;) {
			client *c = &s->clients[k];
			int drop = 0;

			if (fds[k + 2].revents & (POLLIN | POLLHUP | POLLERR))
				drop = read_client(s, c) < 0;
			if (!drop && c->parked && c->parked_deadline <= now) {
				free(c->parked);
				c->parked = NULL;
				reply(c, STORE_R_TIMEOUT, NULL, 0, 0);
				drop = process_input(s, c) < 0;
			}
			if (!drop && !c->authed && c->hello_deadline <= now) {
				weft_log(WEFT_LOG_WARN, "store: refused a client from %s: no "
					 "hello within %d ms", c->addr, HELLO_TIMEOUT_MS);
				atomic_fetch_add(&s->refused, 1);
				drop = 1;
			}
			if (drop)
				drop_client(s, k);
		}
		if (fds[1].revents & POLLIN)
			accept_client(s);
	}
	free(fds);
	return NULL;
}

static weft_status listen_on(const char *host, int port, int *fd_out, int *port_out)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char serv[16];
	int err, fd = -1, saved = 0;

	snprintf(serv, sizeof(serv), "%d", port);
	err = getaddrinfo(host, serv, &hints, &res);
	if (err)
		return weft_error_set(WEFT_ERR_COMM, "store: cannot resolve '%s': %s",
				      host ? host : "*", gai_strerror(err));
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int one = 1;

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			saved = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 512) == 0)
			break;
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return weft_error_set(WEFT_ERR_COMM, "store: cannot listen on %s:%d: %s%s",
				      host ? host : "*", port, strerror(saved),
				      saved == EADDRINUSE ? " (pick another --master-port)" : "");
	{
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		getsockname(fd, (struct sockaddr *)&ss, &sl);
		*port_out = ntohs(ss.ss_family == AF_INET6 ?
				  ((struct sockaddr_in6 *)&ss)->sin6_port :
				  ((struct sockaddr_in *)&ss)->sin_port);
	}
	*fd_out = fd;
	return WEFT_OK;
}

weft_status weft_store_server_start(const char *host, int port, const char *secret,
				    weft_store_server **out)
{
	weft_store_server *s;
	weft_status st;
	size_t slen = secret ? strlen(secret) : 0;

	if (!slen || slen > STORE_SECRET_MAX)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "store: the job secret must be 1..%d "
				      "bytes, got %zu", STORE_SECRET_MAX, slen);
	s = calloc(1, sizeof(*s));
	if (!s)
		return weft_error_set(WEFT_ERR_NOMEM, "store: out of memory");
	s->wake[0] = s->wake[1] = -1;
	s->secret = malloc(slen);
	if (!s->secret) {
		st = weft_error_set(WEFT_ERR_NOMEM, "store: out of memory");
		goto out_free;
	}
	memcpy(s->secret, secret, slen);
	s->secret_len = slen;
	st = listen_on(host, port, &s->listen_fd, &s->port);
	if (st)
		goto out_free;
	if (pipe2(s->wake, O_CLOEXEC)) {
		st = weft_error_set(WEFT_ERR_COMM, "store: pipe failed: %s", strerror(errno));
		goto out_close;
	}
	if (pthread_create(&s->thread, NULL, serve, s)) {
		st = weft_error_set(WEFT_ERR_COMM, "store: cannot start the server thread");
		goto out_pipe;
	}
	weft_log(WEFT_LOG_DEBUG, "store: serving on %s:%d", host ? host : "*", s->port);
	*out = s;
	return WEFT_OK;
out_pipe:
	close(s->wake[0]);
	close(s->wake[1]);
out_close:
	close(s->listen_fd);
out_free:
	free(s->secret);
	free(s);
	return st;
}

int weft_store_server_port(const weft_store_server *srv)
{
	return srv->port;
}

int64_t weft_store_server_refused(const weft_store_server *srv)
{
	return atomic_load(&((weft_store_server *)srv)->refused);
}

void weft_store_server_stop(weft_store_server *s)
{
	uint8_t b = 1;

	if (!s)
		return;
	atomic_store(&s->stop, 1);
	while (write(s->wake[1], &b, 1) < 0 && errno == EINTR)
		;
	pthread_join(s->thread, NULL);
	while (s->nclients)
		drop_client(s, s->nclients - 1);
	free(s->clients);
	for (size_t b2 = 0; b2 < NBUCKETS; b2++) {
		for (entry *e = s->buckets[b2], *next; e; e = next) {
			next = e->next;
			free(e->key);
			free(e->val);
			free(e);
		}
	}
	close(s->listen_fd);
	close(s->wake[0]);
	close(s->wake[1]);
	free(s->secret);
	free(s);
}
