/* Encoding many texts on several threads, and cutting a long text into
 * pieces that encode apart. */
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>

#include "text/text_impl.h"

typedef struct pool_job {
	const char *const *texts;
	const size_t *lens;
	size_t n;
	weft_token_ids *outs;
	atomic_size_t next;
	atomic_int failed;
} pool_job;

typedef struct pool_worker {
	pool_job *job;
	weft_tokenizer_encoder *enc;
	weft_status st;
	char err[512];
} pool_worker;

static void *work(void *arg)
{
	pool_worker *w = arg;
	pool_job *job = w->job;

	for (;;) {
		size_t i = atomic_fetch_add(&job->next, 1);

		if (i >= job->n || atomic_load(&job->failed))
			break;
		w->st = weft_tokenizer_encode(w->enc, job->texts[i], job->lens[i], &job->outs[i]);
		if (w->st) {
			/* the last error is per thread: keep it for the caller */
			snprintf(w->err, sizeof(w->err), "%s", weft_error_last());
			atomic_store(&job->failed, 1);
			break;
		}
	}
	return NULL;
}

weft_status weft_tokenizer_encode_many(weft_tokenizer_encoder *const *encoders, int n_encoders,
				       const char *const *texts, const size_t *lens, size_t n,
				       weft_token_ids *outs)
{
	pool_job job = { .texts = texts, .lens = lens, .n = n, .outs = outs };
	pool_worker workers[256];
	pthread_t tids[256];
	int started = 0, nw = n_encoders < 1 ? 1 : n_encoders > 256 ? 256 : n_encoders;
	weft_status st = WEFT_OK;

	atomic_init(&job.next, 0);
	atomic_init(&job.failed, 0);
	if ((size_t)nw > n)
		nw = n > 0 ? (int)n : 1;
	for (int i = 0; i < nw; i++)
		workers[i] = (pool_worker){ .job = &job, .enc = encoders[i] };
	/* worker 0 runs on the calling thread */
	for (int i = 1; i < nw; i++) {
		if (pthread_create(&tids[i], NULL, work, &workers[i])) {
			st = weft_error_set(WEFT_ERR_IO, "cannot start tokenizer thread %d of %d", i,
					    nw);
			atomic_store(&job.failed, 1);
			break;
		}
		started = i;
	}
	work(&workers[0]);
	for (int i = 1; i <= started; i++)
		pthread_join(tids[i], NULL);
	if (st)
		return st;
	for (int i = 0; i < nw; i++)
		if (workers[i].st)
			return weft_error_set(workers[i].st, "%s", workers[i].err);
	return WEFT_OK;
}

size_t weft_tokenizer_split(const weft_tokenizer *t, const char *text, size_t len,
			    size_t target, size_t *ends, size_t max_pieces)
{
	size_t n = 0, start = 0;

	if (max_pieces == 0)
		return 0;
	while (n + 1 < max_pieces && len - start > target + target / 2) {
		size_t cut = weft_tokenizer_cut_point(t, text, len, start + target);

		if (cut == 0)
			break;
		ends[n++] = cut;
		start = cut;
	}
	ends[n++] = len;
	return n;
}
