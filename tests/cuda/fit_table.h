/* fit_table.h - the `weft fit` tests of tests/cuda as rows of one table:
 * a row is a configuration (model, strategy, ranks, precision, optimizer,
 * steps); the test runs it once on accelerator: cpu (the reference) and
 * once or more on cuda (over comm gloo, or whatever the caller's extra
 * arguments ask), and holds every step's train loss (and, where the row
 * says, gradient norm) within the row's relative bound of the reference.
 *
 * One CPU reference per configuration: the reference is named for the
 * row's configuration, not for the CUDA run, so rows that differ only in
 * how the CUDA side runs (comm nccl, an offloaded optimizer, a hook on
 * the device only) compare against the same CPU run, made once.
 *
 * Defaults (a field left 0 or NULL): a GPT of 1 block, width 16 over 2
 * heads, vocabulary 256, context 8; 2 ranks over comm gloo; 32-true; AdamW
 * at lr 3e-3, weight decay 0.1; gradient clipping at 0.5 (so the norm is
 * taken on the device); batch 2; 3 steps. The fixed corpus is
 * ct_write_corpus's, so what the rows measure does not move when the
 * project's text does.
 */
#ifndef WEFT_TEST_FIT_TABLE_H
#define WEFT_TEST_FIT_TABLE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test.h"

#define FT_MAX_STEPS 8
#define FT_MAX_REFS 32

/* AdamW at the fit tests' rate: one step moves the loss by ~1e-2, so a
 * defect that changes one step moves the losses by 1e-4 or more. */
#define FT_ADAMW "{name: adamw, lr: 3.0e-3, weight_decay: 0.1}"
/* SGD with momentum and decay: optim_step's other kernel. */
#define FT_SGD "{name: sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.01}"
/* the default model: 1 block, width 16 over 2 heads, vocabulary 256 */
#define FT_GPT "class: gpt, n_layer: 1, n_head: 2, n_embd: 16, vocab_size: 256, bias: true"

typedef struct ft_row {
	const char *name;      /* the CUDA run's name */
	const char *strategy;  /* trainer.strategy (a flow mapping); NULL: the default
				* (single on 1 rank), no comm */
	int devices;           /* ranks; 0: 2 */
	const char *precision; /* trainer.precision; NULL: 32-true */
	const char *model;     /* the model mapping's keys but block_size; NULL: FT_GPT */
	int block;             /* context length; 0: 8 */
	const char *optimizer; /* NULL: FT_ADAMW */
	int accumulate;        /* accumulate_grad_batches; 0: 1 */
	int steps;             /* 0: 3 */
	int no_clip;           /* 1: no gradient clipping (and no norm compared) */
	double rtol;           /* relative bound of loss and norm; 0: 1e-5 */
	int falls;             /* 1: the reference's loss must fall over the steps */
} ft_row;

/* The configurations whose CPU reference has run (by reference name). */
static char ft_refs[FT_MAX_REFS][128];
static int ft_nrefs;

static inline int ft_steps(const ft_row *r)
{
	return r->steps ? r->steps : 3;
}

/* The reference's name: the configuration's fields, so equal
 * configurations share it. */
static inline void ft_ref_name(const ft_row *r, char *out, size_t len)
{
	unsigned long h = 5381;
	char key[2048];

	snprintf(key, sizeof(key), "%s|%d|%s|%s|%d|%s|%d|%d|%d",
		 r->strategy ? r->strategy : "", r->devices,
		 r->precision ? r->precision : "", r->model ? r->model : "", r->block,
		 r->optimizer ? r->optimizer : "", r->accumulate, r->steps, r->no_clip);
	for (const char *p = key; *p; p++)
		h = h * 33u + (unsigned char)*p;
	snprintf(out, len, "ref_%08lx_cpu", h & 0xfffffffful);
}

/* DIR/CONFIG.yaml for row r (accelerator: cpu; the CUDA runs override it
 * on the command line); returns 0 on success. */
static inline int ft_write_config(const char *dir, const char *config, const char *corpus,
			   const ft_row *r)
{
	char path[1200];
	int block = r->block ? r->block : 8;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.yaml", dir, config);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f,
		"seed_everything: 11\n"
		"trainer:\n"
		"  accelerator: cpu\n"
		"  devices: %d\n"
		"%s%s%s"
		"  precision: %s\n"
		"  accumulate_grad_batches: %d\n"
		"  max_steps: %d\n"
		"  log_every_n_steps: 1\n"
		"  limit_val_batches: 0\n"
		"  enable_checkpointing: false\n"
		"  enable_progress_bar: false\n"
		"%s"
		"  default_root_dir: %s/runs\n"
		"model: {%s, block_size: %d, dropout: 0.0}\n"
		"data: {class: text, paths: [%s], block_size: %d, batch_size: 2,\n"
		"       val_fraction: 0.1, shuffle: false}\n"
		"optimizer: %s\n",
		r->devices ? r->devices : 2, r->strategy ? "  comm: gloo\n  strategy: " : "",
		r->strategy ? r->strategy : "", r->strategy ? "\n" : "",
		r->precision ? r->precision : "32-true", r->accumulate ? r->accumulate : 1,
		ft_steps(r), r->no_clip ? "" : "  gradient_clip_val: 0.5\n", dir,
		r->model ? r->model : FT_GPT, block, corpus, block,
		r->optimizer ? r->optimizer : FT_ADAMW);
	return fclose(f);
}

/* The CPU reference of row r, run unless an equal configuration ran it;
 * its name (the config's and the run's) in `ref`. */
static inline void ft_reference(const char *dir, const char *corpus, const ft_row *r,
				char *ref, size_t len)
{
	ft_ref_name(r, ref, len);
	for (int i = 0; i < ft_nrefs; i++)
		if (!strcmp(ft_refs[i], ref))
			return;
	WT_REQUIRE(ft_write_config(dir, ref, corpus, r) == 0);
	WT_CHECK(ct_fit(dir, ref, ref, "cpu", "") == 0);
	WT_REQUIRE(ft_nrefs < FT_MAX_REFS);
	snprintf(ft_refs[ft_nrefs++], sizeof(ft_refs[0]), "%s", ref);
}

/* Row r: the CPU reference (once per configuration), the CUDA run named
 * r->name with `extra` arguments, every step compared within the row's
 * bound; the worst relative difference is printed and returned. */
static inline double ft_check_row(const char *dir, const char *corpus, const ft_row *r,
			   const char *extra)
{
	double cl[FT_MAX_STEPS], cn[FT_MAX_STEPS], gl[FT_MAX_STEPS], gn[FT_MAX_STEPS];
	double rtol = r->rtol > 0 ? r->rtol : 1e-5, worst = 0.0;
	int steps = ft_steps(r), nc, ng;
	char ref[128];

	WT_REQUIRE(steps <= FT_MAX_STEPS);
	ft_reference(dir, corpus, r, ref, sizeof(ref));
	WT_CHECK(ct_fit(dir, ref, r->name, "cuda", extra ? extra : "") == 0);
	nc = ct_read_metrics(dir, ref, 0, cl, r->no_clip ? NULL : cn, steps);
	ng = ct_read_metrics(dir, r->name, 0, gl, r->no_clip ? NULL : gn, steps);
	WT_CHECK(nc == steps && ng == steps);
	for (int s = 0; s < nc && s < ng; s++) {
		WT_CLOSE(gl[s], cl[s], rtol, 0.0);
		worst = fmax(worst, fabs(gl[s] - cl[s]) / fabs(cl[s]));
		if (!r->no_clip) {
			WT_CLOSE(gn[s], cn[s], rtol, 0.0);
			worst = fmax(worst, fabs(gn[s] - cn[s]) / fabs(cn[s]));
		}
	}
	fprintf(stderr, "%s: cuda vs cpu (%s) worst rel %.3g over %d steps (bound %g)\n",
		r->name, ref, worst, nc < ng ? nc : ng, rtol);
	/* the runs trained */
	if (r->falls)
		WT_CHECK(nc == steps && cl[steps - 1] < cl[0]);
	return worst;
}

/* Every row of a table, each over comm gloo. */
static inline void ft_check_rows(const char *dir, const char *corpus, const ft_row *rows,
				 size_t n)
{
	for (size_t i = 0; i < n; i++)
		ft_check_row(dir, corpus, &rows[i], "");
}

/* A refused configuration: row r on cuda fails, and its log holds both
 * texts (what was wrong, what to do). */
static inline void ft_check_refused(const char *dir, const char *corpus, const ft_row *r,
			     const char *what, const char *advice)
{
	char log[1200];

	WT_REQUIRE(ft_write_config(dir, r->name, corpus, r) == 0);
	WT_CHECK(ct_fit(dir, r->name, r->name, "cuda", "") != 0);
	snprintf(log, sizeof(log), "%s/%s.log", dir, r->name);
	WT_CHECK(ct_file_has(log, what) && ct_file_has(log, advice));
}

#endif /* WEFT_TEST_FIT_TABLE_H */
