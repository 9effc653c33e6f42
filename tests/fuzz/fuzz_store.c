/* libFuzzer target for the rendezvous store's request parser
 * (core/dist/store_server.c: the hello, frames, items, every command).
 *
 * The server's file is compiled into this one so its static parser
 * (process_input) runs without sockets or threads: one server and one
 * client per input, the client's replies going to a non-blocking socket
 * pair that is drained and discarded. The first byte sets up the client:
 *   - bit 0: already past the hello (else the bytes must start with one;
 *     the job secret is "s3cret");
 *   - bits 1..7: the bytes arrive in pieces of that many (0: all at once),
 *     as a slow network would split them.
 * The rest is what the client sends. A parked GET or WAIT is then timed
 * out as the server's loop does. Refusals are fine; crashes, leaks,
 * undefined behaviour and unbounded memory are not.
 */
#include "dist/store_server.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drain(int fd)
{
	uint8_t buf[4096];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

/* Appends p[0..len) to c's input as read_client does; -1: dropped. */
static int feed(weft_store_server *s, client *c, const uint8_t *p, size_t len)
{
	if (c->in_cap - c->in_len < len) {
		size_t cap = c->in_len + len;
		uint8_t *n;

		if (cap > STORE_FRAME_MAX + 65536u)
			return -1;
		n = realloc(c->in, cap);
		if (!n)
			return -1;
		c->in = n;
		c->in_cap = cap;
	}
	memcpy(c->in + c->in_len, p, len);
	c->in_len += len;
	return process_input(s, c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char secret[] = "s3cret";
	weft_store_server s = { .listen_fd = -1, .secret = (uint8_t *)secret,
				.secret_len = sizeof(secret) - 1 };
	client c = { .fd = -1 };
	size_t piece, off;
	int sv[2], dropped = 0;

	if (size < 1 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv))
		return 0;
	c.fd = sv[0];
	c.authed = data[0] & 1;
	snprintf(c.addr, sizeof(c.addr), "fuzz");
	piece = data[0] >> 1;
	data++;
	size--;
	if (!piece)
		piece = size ? size : 1;
	for (off = 0; off < size && !dropped; off += piece) {
		size_t n = size - off < piece ? size - off : piece;

		dropped = feed(&s, &c, data + off, n) < 0;
		drain(sv[1]);
	}
	if (!dropped && c.parked) {
		free(c.parked);
		c.parked = NULL;
		reply(&c, STORE_R_TIMEOUT, NULL, 0, 0);
		(void)process_input(&s, &c);
		drain(sv[1]);
	}
	free(c.in);
	free(c.parked);
	close(sv[0]);
	close(sv[1]);
	for (size_t b = 0; b < NBUCKETS; b++) {
		for (entry *e = s.buckets[b], *next; e; e = next) {
			next = e->next;
			free(e->key);
			free(e->val);
			free(e);
		}
	}
	return 0;
}
