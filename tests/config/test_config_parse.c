/* core/config: YAML text becomes a tree that knows where each node was
 * written; malformed or ambiguous documents are refused with the place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfg_test_util.h"

static void test_positions_and_paths(void)
{
	weft_config *cfg = load("# a comment\n"
				"trainer:\n"
				"  devices: 2\n"
				"  strategy:\n"
				"    name: zero\n"
				"    stage: 2\n"
				"model:\n"
				"  hidden: [128, 64]\n"
				"  empty:\n"
				"  quoted: 'null'\n");
	const weft_cfg *stage = at_path(cfg, "trainer.strategy.stage");
	const weft_cfg *h1 = at_path(cfg, "model.hidden.1");

	WT_CHECK(weft_cfg_kind_of(weft_config_root(cfg)) == WEFT_CFG_MAP);
	WT_CHECK(weft_cfg_size(weft_config_root(cfg)) == 2);
	WT_CHECK(strcmp(weft_cfg_scalar(stage), "2") == 0);
	WT_CHECK(strcmp(where(stage), "cfg.yaml:6:12") == 0);
	WT_CHECK(strcmp(path_of(stage), "trainer.strategy.stage") == 0);
	WT_CHECK(strcmp(weft_cfg_scalar(h1), "64") == 0);
	WT_CHECK(strcmp(where(h1), "cfg.yaml:8:17") == 0);
	WT_CHECK(strcmp(path_of(h1), "model.hidden.1") == 0);
	WT_CHECK(strcmp(path_of(weft_config_root(cfg)), "") == 0);
	/* nothing after the colon is null; a quoted 'null' is a string */
	WT_CHECK(weft_cfg_kind_of(at_path(cfg, "model.empty")) == WEFT_CFG_NULL);
	WT_CHECK(at_path(cfg, "model.empty") != NULL);
	WT_CHECK(weft_cfg_kind_of(at_path(cfg, "model.quoted")) == WEFT_CFG_SCALAR);
	WT_CHECK(strcmp(weft_cfg_scalar(at_path(cfg, "model.quoted")), "null") == 0);
	WT_CHECK(strcmp(weft_cfg_key_at(weft_config_root(cfg), 1), "model") == 0);
	WT_CHECK(weft_cfg_key_at(weft_config_root(cfg), 2) == NULL);
	WT_CHECK(weft_cfg_at(weft_config_root(cfg), 2) == NULL);
	WT_CHECK(weft_cfg_get(stage, "x") == NULL);
	WT_CHECK(weft_cfg_scalar(at_path(cfg, "trainer")) == NULL);
	WT_CHECK(strcmp(where(NULL), "<unknown>") == 0);
	weft_config_free(cfg);
}

static void test_empty_documents(void)
{
	const char *empties[] = { "", "# only a comment\n", "---\n", "~\n", "{}\n" };

	for (size_t i = 0; i < sizeof(empties) / sizeof(empties[0]); i++) {
		weft_config *cfg = load(empties[i]);

		WT_CHECK(weft_cfg_kind_of(weft_config_root(cfg)) == WEFT_CFG_MAP);
		WT_CHECK(weft_cfg_size(weft_config_root(cfg)) == 0);
		WT_OK(weft_config_check_unused(cfg));
		weft_config_free(cfg);
	}
}

static void test_malformed(void)
{
	/* libyaml's reason with the place it found the problem */
	WT_FAILS(load_err("trainer:\n  devices: 2\n strategy: ddp\n"), WEFT_ERR_PARSE,
		 "cfg.yaml:3:", "did not find expected key");
	WT_FAILS(load_err("model:\n  hidden: [1, 2\n"), WEFT_ERR_PARSE, "cfg.yaml:3:1:",
		 "did not find expected ',' or ']'");
	WT_FAILS(load_err("a: b: c\n"), WEFT_ERR_PARSE, "cfg.yaml:1:5:",
		 "mapping values are not allowed");
	WT_FAILS(load_err("a: \"unterminated\n"), WEFT_ERR_PARSE, "cfg.yaml:2:1:",
		 "found unexpected end of stream");
	WT_FAILS(load_err("a: 1\nb:\t2\n\tc: 3\n"), WEFT_ERR_PARSE, "cfg.yaml:3:1:");
	/* invalid UTF-8: the reader's error, at the line and column of the byte */
	WT_FAILS(load_err("a: 1\nb: x\xff\n"), WEFT_ERR_PARSE, "cfg.yaml:2:5:",
		 "invalid leading UTF-8 octet", "UTF-8");
	WT_FAILS(load_err("a: 1\nbb: \xc3"), WEFT_ERR_PARSE, "cfg.yaml:2:5:",
		 "incomplete UTF-8 octet sequence", "save the file as UTF-8");
}

static void test_refused_documents(void)
{
	WT_FAILS(load_err("- 1\n- 2\n"), WEFT_ERR_CONFIG, "cfg.yaml:1:1:",
		 "top level of a config must be a mapping", "got a sequence");
	WT_FAILS(load_err("just text\n"), WEFT_ERR_CONFIG, "cfg.yaml:1:1:",
		 "must be a mapping", "got 'just text'");
	WT_FAILS(load_err("lr: 0.1\nmodel: {}\nlr: 0.2\n"), WEFT_ERR_CONFIG, "cfg.yaml:3:1:",
		 "duplicate key 'lr' in the top level", "first at cfg.yaml:1:1");
	WT_FAILS(load_err("optim:\n  lr: 1\n  betas: [1, 2]\n  lr: 2\n"), WEFT_ERR_CONFIG,
		 "cfg.yaml:4:3:", "duplicate key 'lr' in 'optim'", "first at cfg.yaml:2:3");
	WT_FAILS(load_err("a: 1\n---\nb: 2\n"), WEFT_ERR_CONFIG, "cfg.yaml:2:1:",
		 "second YAML document");
	WT_FAILS(load_err("? [1, 2]\n: x\n"), WEFT_ERR_CONFIG, "cfg.yaml:1:3:",
		 "key must be a plain string, not a sequence");
	WT_FAILS(load_err("a: \"x\\0y\"\n"), WEFT_ERR_CONFIG, "cfg.yaml:1:4:", "NUL character");
	WT_FAILS(load_err("a: 1\n\"k\\0\": 2\n"), WEFT_ERR_CONFIG, "cfg.yaml:2:1:",
		 "the key holds a NUL character");
	WT_FAILS(load_err("{a: 1}: x\n"), WEFT_ERR_CONFIG, "cfg.yaml:1:1:",
		 "key must be a plain string, not a mapping");
}

static void test_anchors_and_merges(void)
{
	weft_config *cfg = load("base: &b\n"
				"  lr: 0.1\n"
				"  wd: 0.01\n"
				"adam:\n"
				"  <<: *b\n"
				"  lr: 0.001\n"
				"sgd: *b\n"
				"ref: &x 7\n"
				"again: *x\n");
	const weft_cfg *adam = at_path(cfg, "adam");

	WT_CHECK(weft_cfg_size(adam) == 2);
	WT_CHECK(strcmp(weft_cfg_key_at(adam, 0), "lr") == 0);
	WT_CHECK(strcmp(weft_cfg_scalar(weft_cfg_get(adam, "lr")), "0.001") == 0);
	WT_CHECK(strcmp(weft_cfg_scalar(weft_cfg_get(adam, "wd")), "0.01") == 0);
	/* a merged value reports where it was written, and its new path */
	WT_CHECK(strcmp(where(weft_cfg_get(adam, "wd")), "cfg.yaml:3:7") == 0);
	WT_CHECK(strcmp(path_of(weft_cfg_get(adam, "wd")), "adam.wd") == 0);
	WT_CHECK(strcmp(weft_cfg_scalar(at_path(cfg, "sgd.lr")), "0.1") == 0);
	WT_CHECK(strcmp(path_of(at_path(cfg, "sgd.lr")), "sgd.lr") == 0);
	WT_CHECK(strcmp(weft_cfg_scalar(at_path(cfg, "again")), "7") == 0);
	weft_config_free(cfg);

	/* a list of merges: earlier ones win, the mapping's own keys win */
	cfg = load("a: &a {x: 1, y: 1}\nb: &b {y: 2, z: 2}\nc: {<<: [*a, *b], z: 3}\n");
	WT_CHECK(weft_cfg_size(at_path(cfg, "c")) == 3);
	WT_CHECK(strcmp(weft_cfg_scalar(at_path(cfg, "c.x")), "1") == 0);
	WT_CHECK(strcmp(weft_cfg_scalar(at_path(cfg, "c.y")), "1") == 0);
	WT_CHECK(strcmp(weft_cfg_scalar(at_path(cfg, "c.z")), "3") == 0);
	WT_CHECK(strcmp(weft_cfg_key_at(at_path(cfg, "c"), 0), "z") == 0);
	weft_config_free(cfg);

	WT_FAILS(load_err("a: *nope\n"), WEFT_ERR_CONFIG, "cfg.yaml:1:4:", "alias '*nope'",
		 "no anchor");
	WT_FAILS(load_err("a: &r\n  b: *r\n"), WEFT_ERR_CONFIG, "cfg.yaml:2:6:",
		 "inside the node its anchor names");
	WT_FAILS(load_err("a: &r 1\n*r : 2\n"), WEFT_ERR_CONFIG, "cfg.yaml:2:1:",
		 "cannot be a key");
	WT_FAILS(load_err("a: {<<: 3}\n"), WEFT_ERR_CONFIG, "cfg.yaml:1:9:",
		 "merge key '<<' takes a mapping");
}

/* Nine levels of ten aliases each would be 10^9 nodes: refused quickly. */
static void test_billion_laughs(void)
{
	char text[2048];
	size_t pos = 0;

	pos += (size_t)snprintf(text + pos, sizeof(text) - pos, "l0: &l0 [lol]\n");
	for (int i = 1; i <= 9; i++)
		pos += (size_t)snprintf(text + pos, sizeof(text) - pos,
					"l%d: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, "
					"*l%d, *l%d]\n",
					i, i, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1,
					i - 1, i - 1);
	WT_FAILS(load_err(text), WEFT_ERR_CONFIG, "expand to more than 100000 nodes");
}

static void test_too_deep(void)
{
	char text[1200];

	memset(text, '[', 600);
	memset(text + 600, ']', 600);
	memcpy(text, "a: ", 3);
	text[sizeof(text) - 1] = '\0';
	WT_FAILS(load_err(text), WEFT_ERR_CONFIG, "nested more than 256 levels");
}

static void test_files(void)
{
	char path[] = "/tmp/weft_cfg_XXXXXX";
	int fd = mkstemp(path);
	FILE *f;
	weft_config *cfg = NULL;

	WT_REQUIRE(fd >= 0);
	f = fdopen(fd, "w");
	WT_REQUIRE(f != NULL);
	fputs("trainer:\n  max_steps: 10\n", f);
	fclose(f);
	WT_OK(weft_config_load_file(path, &cfg));
	WT_CHECK(strncmp(where(at_path(cfg, "trainer.max_steps")), path, strlen(path)) == 0);
	WT_STR_CONTAINS(where(at_path(cfg, "trainer.max_steps")), ":2:14");
	weft_config_free(cfg);
	unlink(path);
	cfg = NULL;
	WT_FAILS(weft_config_load_file(path, &cfg), WEFT_ERR_NOT_FOUND, "cannot open config",
		 path, "No such file");
	WT_CHECK(cfg == NULL);
	WT_FAILS(weft_config_load_file("/", &cfg), WEFT_ERR_IO,
		 "config '/' is not a regular file: it is a directory");
}

/* A realistic config of a few hundred lines parses, with exact positions. */
static void test_large_config(void)
{
	size_t cap = 1 << 16, pos = 0;
	char *text = malloc(cap);
	weft_config *cfg;
	const weft_cfg *node;

	WT_REQUIRE(text != NULL);
	for (int s = 0; s < 30; s++) {
		pos += (size_t)snprintf(text + pos, cap - pos, "section%d:\n", s);
		for (int k = 0; k < 8; k++)
			pos += (size_t)snprintf(text + pos, cap - pos, "  key%d: %d\n", k, s * 100 + k);
		pos += (size_t)snprintf(text + pos, cap - pos, "  list: [a, b, {c: %d}]\n", s);
	}
	/* 30 sections of 10 lines: 300 lines */
	cfg = load(text);
	WT_CHECK(weft_cfg_size(weft_config_root(cfg)) == 30);
	node = at_path(cfg, "section29.key7");
	WT_CHECK(strcmp(weft_cfg_scalar(node), "2907") == 0);
	WT_CHECK(strcmp(where(node), "cfg.yaml:299:9") == 0);
	node = at_path(cfg, "section17.list.2.c");
	WT_CHECK(strcmp(weft_cfg_scalar(node), "17") == 0);
	WT_CHECK(strcmp(path_of(node), "section17.list.2.c") == 0);
	weft_config_free(cfg);
	free(text);
}

int main(void)
{
	test_positions_and_paths();
	test_empty_documents();
	test_malformed();
	test_refused_documents();
	test_anchors_and_merges();
	test_billion_laughs();
	test_too_deep();
	test_files();
	test_large_config();
	return wt_done("test_config_parse");
}
