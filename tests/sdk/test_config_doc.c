/* docs/config.md cannot drift from the code: every config key that the
 * code reads must be documented there.
 *
 * Which keys the code reads is measured, not grepped: the config reader
 * logs every key any reader asks a mapping for (WEFT_CONFIG_TRACE, core/
 * config/read.c), present in the file or not, so a getter with a default
 * counts as read. The test runs `weft fit --trainer.max_steps=1` over
 * configs that together take every branch that reads keys (each data
 * class, optimizer, lr schedule and strategy, the callbacks, plugins),
 * then, best effort, once more with every other strategy and optimizer
 * plugin the build has (`weft plugins`), so a new plugin's options are
 * caught without editing this list.
 *
 * A dotted key P (sequence indices dropped) counts as documented when
 * docs/config.md has "`P`", or when a "## " section whose heading names
 * one of P's other components has P's last component in backticks, alone
 * or after a dot ("`lr`" in "## optimizer", "`ddp.bucket_cap_mb`" in
 * "## strategy: ddp / dp / single" for trainer.strategy.bucket_cap_mb). A
 * one-component key needs "`P`" or a heading naming it. Every
 * undocumented key is listed with the sections to add it to. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sdk_util.h"
#include "weft_test.h"

#define MAX_KEYS 1024

static char out[1 << 16];
static char *keys[MAX_KEYS];
static size_t nkeys;

static const char common[] =
	"seed_everything: 1\n"
	"trainer:\n"
	"  max_steps: 1\n"
	"  enable_progress_bar: false\n"
	"  threads: 1\n"
	"  callbacks:\n"
	"    model_checkpoint: {every_n_train_steps: 1, monitor: train_loss}\n"
	"    early_stopping: {monitor: val_loss}\n"
	"plugins: {paths: [.]}\n";

static const char gpt_text[] =
	"model: {class: gpt, n_layer: 1, n_head: 2, n_embd: 16, block_size: 16, vocab_size: 256}\n"
	"data: {class: text, paths: [corpus.txt], block_size: 16, batch_size: 4}\n";

/* Each run: the model and data, the optimizer, the schedule. They must all
 * train; together they take every reading branch of the built-ins. */
static const char *const runs[][3] = {
	{ gpt_text, "optimizer: {name: sgd, lr: 0.1, momentum: 0.9}",
	  "lr_scheduler: {name: cosine, warmup_steps: 1, max_steps: 10}" },
	{ "model: {class: mlp, in_features: 4, hidden: [8], out_features: 3}\n"
	  "data: {class: npy, x: x.npy, y: y.npy, batch_size: 4}",
	  "optimizer: {name: adamw, lr: 0.01}", "lr_scheduler: {name: linear, max_steps: 10}" },
	{ "model: {class: mlp, in_features: 4, hidden: [8], out_features: 3}\n"
	  "data: {class: idx, images: img.idx, labels: lab.idx, batch_size: 4}",
	  "optimizer: {name: adam, lr: 0.01}", "lr_scheduler: {name: step, step_size: 2}" },
	{ "model: {class: gpt, n_layer: 1, n_head: 2, n_embd: 16, block_size: 8, vocab_size: 64}\n"
	  "data: {class: tokens, path: tok.bin, block_size: 8, batch_size: 2}",
	  "optimizer: {name: lion, lr: 0.001}", "lr_scheduler: {name: warmup, warmup_steps: 2}" },
	{ gpt_text, "optimizer: {name: sgd, lr: 0.1}", "lr_scheduler: {name: WarmupLR}" },
	{ gpt_text, "optimizer: {name: sgd, lr: 0.1}",
	  "lr_scheduler: {name: WarmupDecayLR, total_num_steps: 10, warmup_num_steps: 2}" },
	{ gpt_text, "optimizer: {name: sgd, lr: 0.1}",
	  "lr_scheduler: {name: WarmupCosineLR, total_num_steps: 10, warmup_num_steps: 2}" },
	{ gpt_text, "optimizer: {name: sgd, lr: 0.1}", "lr_scheduler: {name: constant}" },
};

/* A little-endian .npy v1.0 file: `n` rows of `shape_tail` (e.g. ", 4")
 * holding `data` of dtype `descr`. */
static void write_npy(const char *dir, const char *name, const char *descr, const char *shape,
		      const void *data, size_t bytes)
{
	char buf[4096], hdr[128];
	size_t hl;

	hl = (size_t)snprintf(hdr, sizeof(hdr),
			      "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr,
			      shape);
	while ((10 + hl + 1) % 64)
		hdr[hl++] = ' ';
	hdr[hl++] = '\n';
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (char)(hl & 0xff);
	buf[9] = (char)(hl >> 8);
	memcpy(buf + 10, hdr, hl);
	memcpy(buf + 10 + hl, data, bytes);
	sdk_write(dir, name, buf, 10 + hl + bytes);
}

static void write_data(const char *dir)
{
	float x[32 * 4];
	int64_t y[32];
	unsigned char img[16 + 32 * 4], lab[8 + 32];
	uint16_t tok[512];

	sdk_write_corpus(dir);
	for (int i = 0; i < 32; i++) {
		y[i] = i % 3;
		for (int j = 0; j < 4; j++)
			x[i * 4 + j] = (float)((i + j) % 5) / 5.0f;
	}
	write_npy(dir, "x.npy", "<f4", "32, 4", x, sizeof(x));
	write_npy(dir, "y.npy", "<i8", "32,", y, sizeof(y));
	/* idx: magic 0x0803 (unsigned bytes, 3 dims) N x 2 x 2, labels 0x0801 */
	memcpy(img, "\0\0\x08\x03\0\0\0\x20\0\0\0\x02\0\0\0\x02", 16);
	memcpy(lab, "\0\0\x08\x01\0\0\0\x20", 8);
	for (int i = 0; i < 32; i++) {
		lab[8 + i] = (unsigned char)(i % 3);
		for (int j = 0; j < 4; j++)
			img[16 + i * 4 + j] = (unsigned char)((i * 7 + j * 31) & 0xff);
	}
	sdk_write(dir, "img.idx", img, sizeof(img));
	sdk_write(dir, "lab.idx", lab, sizeof(lab));
	for (int i = 0; i < 512; i++) /* nanoGPT's bare uint16 tokens */
		tok[i] = (uint16_t)((i * 13) % 64);
	sdk_write(dir, "tok.bin", tok, sizeof(tok));
}

/* Runs one config through `weft fit`; returns the exit status. */
static int fit(const char *dir, const char *body, const char *extra_args)
{
	char yaml[4096], cmd[4096];

	snprintf(yaml, sizeof(yaml), "%s%s\n", common, body);
	sdk_write(dir, "run.yaml", yaml, (size_t)-1);
	snprintf(cmd, sizeof(cmd),
		 "env -u WEFT_PLUGIN_PATH WEFT_CONFIG_TRACE=%s/trace.txt %s fit --config run.yaml "
		 "--trainer.max_steps=1 %s", dir, sdk_weft(), extra_args);
	return sdk_run(dir, out, sizeof(out), cmd);
}

/* Lists the plugins of `kind` ("strategy", "optim") that `weft plugins`
 * finds, as a space-separated string. */
static void plugins_of(const char *dir, const char *kind, char *names, size_t cap)
{
	char cmd[1024], *line, *save = NULL;
	size_t len = 0;

	names[0] = '\0';
	snprintf(cmd, sizeof(cmd), "env -u WEFT_PLUGIN_PATH %s plugins", sdk_weft());
	WT_REQUIRE(sdk_run(dir, out, sizeof(out), cmd) == 0);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char k[32], n[128];

		if (sscanf(line, "%31s %127s", k, n) == 2 && !strcmp(k, kind) && len + 130 < cap)
			len += (size_t)snprintf(names + len, cap - len, "%s ", n);
	}
}

static void add_key(const char *raw)
{
	char key[512];
	size_t len = 0;
	const char *p = raw;

	/* drop sequence indices: "a.0.b" -> "a.b" */
	while (*p && len + 1 < sizeof(key)) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		int numeric = n > 0;

		for (size_t i = 0; i < n; i++)
			numeric = numeric && isdigit((unsigned char)p[i]);
		if (!numeric && len + n + 2 < sizeof(key)) {
			if (len)
				key[len++] = '.';
			memcpy(key + len, p, n);
			len += n;
		}
		p = dot ? dot + 1 : p + n;
	}
	key[len] = '\0';
	if (!len)
		return;
	for (size_t i = 0; i < nkeys; i++)
		if (!strcmp(keys[i], key))
			return;
	WT_REQUIRE(nkeys < MAX_KEYS);
	keys[nkeys++] = strdup(key);
}

static void read_trace(const char *dir)
{
	char path[1024], line[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/trace.txt", dir);
	f = fopen(path, "r");
	WT_REQUIRE(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		add_key(line);
	}
	fclose(f);
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *text;
	long n;

	WT_REQUIRE(f != NULL);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	text = calloc(1, (size_t)n + 1);
	WT_REQUIRE(text && fread(text, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	return text;
}

/* Whether "`word`" occurs in text[0..len); with `after_dot`, also
 * "`x.y.word`" (the word as the last part of a dotted name). */
static int has_ticked(const char *text, size_t len, const char *word, int after_dot)
{
	char pat[600];
	size_t pl = (size_t)snprintf(pat, sizeof(pat), "`%s`", word);

	for (size_t i = 0; i + pl <= len; i++) {
		if (!memcmp(text + i, pat, pl))
			return 1;
		if (after_dot && text[i] == '.' && !memcmp(text + i + 1, pat + 1, pl - 1)) {
			size_t j = i;

			while (j > 0 && text[j - 1] != '`' && text[j - 1] != ' ' &&
			       text[j - 1] != '\n')
				j--;
			if (j > 0 && text[j - 1] == '`')
				return 1;
		}
	}
	return 0;
}

/* Whether the heading names one of key's components other than the last
 * (all of them for a one-component key). */
static int heading_names(const char *heading, const char *key)
{
	const char *p = key, *last = strrchr(key, '.');

	for (;;) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		char part[256];

		if (last && p == last + 1)
			return 0;
		snprintf(part, sizeof(part), "%.*s", (int)n, p);
		if (strstr(heading, part))
			return 1;
		if (!dot)
			return 0;
		p = dot + 1;
	}
}

/* The rule in the top comment. `where` receives the sections to add to. */
static int documented(const char *doc, const char *key, char *where, size_t cap)
{
	char top[256];
	const char *leaf = strrchr(key, '.');
	const char *sec = doc;
	size_t wl = 0;

	if (has_ticked(doc, strlen(doc), key, 0))
		return 1;
	snprintf(top, sizeof(top), "%.*s", (int)strcspn(key, "."), key);
	leaf = leaf ? leaf + 1 : NULL;
	where[0] = '\0';
	while ((sec = strstr(sec, "\n## ")) != NULL) {
		const char *head = sec + 4, *eol = strchr(head, '\n');
		const char *next = strstr(head, "\n## ");
		size_t hl = eol ? (size_t)(eol - head) : strlen(head);
		char heading[256];

		snprintf(heading, sizeof(heading), "%.*s", (int)hl, head);
		sec = head;
		if (!heading_names(heading, key))
			continue;
		if (!leaf)
			return 1;
		if (has_ticked(head, next ? (size_t)(next - head) : strlen(head), leaf, 1))
			return 1;
		if (wl + hl + 8 < cap)
			wl += (size_t)snprintf(where + wl, cap - wl, "%s'## %s'", wl ? " or " : "",
					       heading);
	}
	if (!where[0])
		snprintf(where, cap, "a new section '## %s'", top);
	return 0;
}

int main(void)
{
	const char *src = getenv("WEFT_SOURCE_DIR");
	const char *dir = sdk_tmpdir();
	char names[4096], args[512], *doc, *save = NULL, *n;
	struct stat sb;
	size_t missing = 0;
	int rc;

	WT_REQUIRE(src != NULL);
	write_data(dir);
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		char body[2048];

		snprintf(body, sizeof(body), "%s\n%s\n%s", runs[i][0], runs[i][1], runs[i][2]);
		rc = fit(dir, body, "");
		WT_CHECK(rc == 0);
		if (rc)
			fprintf(stderr, "run %zu failed (%d):\n%s\n", i, rc, out);
	}
	/* 2 ranks: ddp and the comm backend's options; a language model's
	 * trainer.sample */
	rc = fit(dir, gpt_text, "--trainer.devices=2 --trainer.strategy=ddp "
		 "'--optimizer={name: sgd, lr: 0.1}' '--trainer.sample={max_new_tokens: 2}'");
	WT_CHECK(rc == 0);
	if (rc)
		fprintf(stderr, "ddp run failed (%d):\n%s\n", rc, out);
	if (stat("/usr/share/datasets/fashion-mnist", &sb) == 0) {
		rc = fit(dir, "model: {class: mlp}\ndata: {class: fashion_mnist, batch_size: 8}\n"
			 "optimizer: {name: sgd, lr: 0.1}", "--trainer.limit_val_batches=1");
		WT_CHECK(rc == 0);
		if (rc)
			fprintf(stderr, "fashion_mnist run failed (%d):\n%s\n", rc, out);
	}
	/* Best effort over every other strategy and optimizer: whatever they
	 * read before finishing (or refusing this tiny setup) is traced. */
	plugins_of(dir, "strategy", names, sizeof(names));
	for (n = strtok_r(names, " ", &save); n; n = strtok_r(NULL, " ", &save)) {
		snprintf(args, sizeof(args), "--trainer.devices=2 '--trainer.strategy={name: %s}' "
			 "'--optimizer={name: sgd, lr: 0.1}'", n);
		if (!fit(dir, gpt_text, args))
			continue;
		/* one-process strategies (single, dp) */
		snprintf(args, sizeof(args), "'--trainer.strategy={name: %s}' "
			 "'--optimizer={name: sgd, lr: 0.1}'", n);
		if (fit(dir, gpt_text, args))
			fprintf(stderr, "note: strategy '%s' did not finish the tiny run\n", n);
	}
	plugins_of(dir, "optim", names, sizeof(names));
	for (n = strtok_r(names, " ", &save); n; n = strtok_r(NULL, " ", &save)) {
		snprintf(args, sizeof(args), "'--optimizer={name: %s}'", n);
		if (fit(dir, gpt_text, args))
			fprintf(stderr, "note: optimizer '%s' did not finish the tiny run\n", n);
	}
	read_trace(dir);
	/* the trace must be real: keys every run reads */
	WT_REQUIRE(nkeys > 50);
	{
		char path[1024];

		snprintf(path, sizeof(path), "%s/docs/config.md", src);
		doc = read_file(path);
	}
	for (size_t i = 0; i < nkeys; i++) {
		char where[1024];

		if (documented(doc, keys[i], where, sizeof(where)))
			continue;
		missing++;
		fprintf(stderr, "docs/config.md does not document '%s', which the code reads: "
			"add it (its type, default and meaning) to %s\n", keys[i], where);
	}
	WT_CHECK(missing == 0);
	fprintf(stderr, "%zu keys read by the code, %zu undocumented\n", nkeys, missing);
	for (size_t i = 0; i < nkeys; i++)
		free(keys[i]);
	free(doc);
	sdk_cleanup();
	return wt_done("sdk_config_doc");
}
