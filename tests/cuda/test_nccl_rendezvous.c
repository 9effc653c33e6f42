/* comm nccl's unique-id rendezvous (plugins/comm/nccl/nccl_rendezvous.h),
 * on an in-memory store with waiting gets: no NCCL or GPU is needed, so it
 * runs everywhere, sanitizers included.
 *
 * The property: a group made again under the same name never hands a rank
 * the id of an earlier generation. The store keeps every key, so when rank
 * 1 arrives for the second init before rank 0 has published the new id, it
 * must wait for the new one (here: still waiting 200 ms later, then gets
 * id B, not the first init's id A). Also: the key names, a rank 0 that
 * never comes (timeout naming the key and what to check), a value of the
 * wrong size, a group name too long for the keys. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "weft/plugin.h"
#include "weft_test.h"
#include "../../plugins/comm/nccl/nccl_rendezvous.h"

enum { ID_BYTES = 128, MAX_KEYS = 32 };

/* ---- an in-memory store: set, waiting get, add ---- */

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int n;
	char key[MAX_KEYS][320];
	unsigned char val[MAX_KEYS][ID_BYTES];
	size_t len[MAX_KEYS];
} st = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static int find(const char *key)
{
	for (int i = 0; i < st.n; i++)
		if (!strcmp(st.key[i], key))
			return i;
	return -1;
}

static int slot(const char *key)
{
	int i = find(key);

	if (i < 0) {
		WT_REQUIRE(st.n < MAX_KEYS);
		i = st.n++;
		snprintf(st.key[i], sizeof(st.key[i]), "%s", key);
		st.len[i] = 0;
	}
	return i;
}

static weft_status s_set(void *ctx, const char *key, const void *v, size_t len)
{
	(void)ctx;
	WT_REQUIRE(len <= ID_BYTES);
	pthread_mutex_lock(&st.mu);
	int i = slot(key);
	memcpy(st.val[i], v, len);
	st.len[i] = len;
	pthread_cond_broadcast(&st.cv);
	pthread_mutex_unlock(&st.mu);
	return WEFT_OK;
}

static weft_status s_get(void *ctx, const char *key, int64_t timeout_ms, void **v, size_t *len)
{
	struct timespec dl;
	int i, rc = 0;

	(void)ctx;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (timeout_ms % 1000) * 1000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&st.mu);
	while ((i = find(key)) < 0 && rc == 0)
		rc = pthread_cond_timedwait(&st.cv, &st.mu, &dl);
	if (i < 0) {
		pthread_mutex_unlock(&st.mu);
		return weft_error_set(WEFT_ERR_TIMEOUT, "store: key %s not set within %lld ms", key,
				      (long long)timeout_ms);
	}
	*v = malloc(st.len[i] ? st.len[i] : 1);
	WT_REQUIRE(*v != NULL);
	memcpy(*v, st.val[i], st.len[i]);
	*len = st.len[i];
	pthread_mutex_unlock(&st.mu);
	return WEFT_OK;
}

static weft_status s_add(void *ctx, const char *key, int64_t delta, int64_t *result)
{
	int64_t x = 0;

	(void)ctx;
	pthread_mutex_lock(&st.mu);
	int i = slot(key);
	if (st.len[i] == sizeof(x))
		memcpy(&x, st.val[i], sizeof(x));
	x += delta;
	memcpy(st.val[i], &x, sizeof(x));
	st.len[i] = sizeof(x);
	pthread_cond_broadcast(&st.cv);
	pthread_mutex_unlock(&st.mu);
	if (result)
		*result = x;
	return WEFT_OK;
}

static void s_release(void *ctx, void *v)
{
	(void)ctx;
	free(v);
}

static const weft_store store = {
	.struct_size = sizeof(weft_store),
	.set = s_set,
	.get = s_get,
	.add = s_add,
	.release = s_release,
};

static const weft_host host = {
	.error_set = weft_error_set,
	.error_wrap = weft_error_wrap,
};

/* ---- ids ---- */

static weft_status make(void *arg, void *id, size_t bytes)
{
	memset(id, *(const int *)arg, bytes);
	return WEFT_OK;
}

static int id_is(const unsigned char *id, int byte)
{
	for (int i = 0; i < ID_BYTES; i++)
		if (id[i] != byte)
			return 0;
	return 1;
}

struct leaf {
	const char *group;
	int64_t timeout_ms;
	unsigned char id[ID_BYTES];
	int64_t gen;
	weft_status st;
	volatile int done;
};

static void *leaf_main(void *p)
{
	struct leaf *l = p;

	l->st = nccl_exchange_id(&host, &store, l->group, 1, l->timeout_ms, "rank 1", make, NULL,
				 l->id, ID_BYTES, &l->gen);
	l->done = 1;
	return NULL;
}

static void test_keys(void)
{
	char buf[320], tiny[8], long_name[400];
	unsigned char id[ID_BYTES];
	int64_t gen;
	int a = 'A';

	WT_CHECK(nccl_key_id(buf, sizeof(buf), "world/split1/c0", 3) == 0);
	WT_CHECK(!strcmp(buf, "world/split1/c0/nccl/3/unique_id"));
	WT_CHECK(nccl_key_inits(buf, sizeof(buf), "world", 2) == 0);
	WT_CHECK(!strcmp(buf, "world/nccl/inits/rank2"));
	WT_CHECK(nccl_key_id(tiny, sizeof(tiny), "world", 0) == -1);
	memset(long_name, 'g', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = 0;
	WT_FAILS(nccl_exchange_id(&host, &store, long_name, 0, 1000, "rank 0", make, &a, id,
				  ID_BYTES, &gen), WEFT_ERR_INVALID_ARG, "rank 0: the group name",
		 "too long");
}

static void test_generations(void)
{
	unsigned char id0[ID_BYTES];
	struct leaf l = { .group = "world", .timeout_ms = 10000 };
	pthread_t th;
	int64_t gen0;
	int a = 'A', b = 'B';

	/* first init: rank 0 publishes A, rank 1 reads it */
	WT_OK(nccl_exchange_id(&host, &store, "world", 0, 1000, "rank 0", make, &a, id0, ID_BYTES,
			       &gen0));
	WT_CHECK(gen0 == 0 && id_is(id0, 'A'));
	leaf_main(&l);
	WT_OK(l.st);
	WT_CHECK(l.gen == 0 && id_is(l.id, 'A'));

	/* the group is made again; rank 1 comes first and must not take A */
	l.done = 0;
	WT_REQUIRE(pthread_create(&th, NULL, leaf_main, &l) == 0);
	usleep(200 * 1000);
	WT_CHECK(!l.done); /* still waiting for the new generation's id */
	WT_OK(nccl_exchange_id(&host, &store, "world", 0, 1000, "rank 0", make, &b, id0, ID_BYTES,
			       &gen0));
	pthread_join(th, NULL);
	WT_OK(l.st);
	WT_CHECK(gen0 == 1 && l.gen == 1);
	WT_CHECK(id_is(l.id, 'B'));
}

static void test_errors(void)
{
	unsigned char small[4] = { 0 };
	struct leaf l = { .group = "lonely", .timeout_ms = 100 };

	/* rank 0 of "lonely" never comes */
	leaf_main(&l);
	WT_CHECK(l.st == WEFT_ERR_TIMEOUT);
	WT_STR_CONTAINS(weft_error_last(), "rank 1: waiting for rank 0's NCCL id");
	WT_STR_CONTAINS(weft_error_last(), "store key lonely/nccl/0/unique_id");
	WT_STR_CONTAINS(weft_error_last(), "has every rank created the group as often");

	/* a value that is not an id: generation 1 of "lonely" for rank 1 */
	WT_OK(s_set(NULL, "lonely/nccl/1/unique_id", small, sizeof(small)));
	l.timeout_ms = 1000;
	leaf_main(&l);
	WT_CHECK(l.st == WEFT_ERR_COMM);
	WT_STR_CONTAINS(weft_error_last(), "holds 4 bytes, not an NCCL unique id (128 bytes)");
}

int main(void)
{
	test_keys();
	test_generations();
	test_errors();
	return wt_done("test_nccl_rendezvous");
}
