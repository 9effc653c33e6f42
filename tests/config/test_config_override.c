/* core/config: command-line overrides and weft_config_set. */
#include <string.h>

#include "cfg_test_util.h"

static const char *doc = "trainer:\n"
			 "  devices: 1\n"
			 "  strategy: ddp\n"
			 "model:\n"
			 "  hidden: [128, 64]\n"
			 "  head:\n";

static void test_scalars_and_new_sections(void)
{
	weft_config *cfg = load(doc);
	const weft_cfg *n;
	int64_t v;

	WT_OK(weft_config_override(cfg, "--trainer.devices=2"));
	n = at_path(cfg, "trainer.devices");
	WT_OK(weft_cfg_as_int(n, &v));
	WT_CHECK(v == 2);
	/* the value's column in the argument */
	WT_CHECK(strcmp(where(n), "<command line>:1:19") == 0);
	WT_CHECK(strcmp(path_of(n), "trainer.devices") == 0);

	/* without dashes; a new section and key are created */
	WT_OK(weft_config_override(cfg, "data.loader.workers=4"));
	n = at_path(cfg, "data.loader.workers");
	WT_CHECK(strcmp(weft_cfg_scalar(n), "4") == 0);
	WT_CHECK(strcmp(where(n), "<command line>:1:21") == 0);
	WT_CHECK(strcmp(where(at_path(cfg, "data.loader")), "<command line>:1:6") == 0);
	WT_CHECK(strcmp(path_of(n), "data.loader.workers") == 0);

	/* a null on the path becomes a mapping */
	WT_OK(weft_config_override(cfg, "--model.head.bias=false"));
	WT_CHECK(weft_cfg_kind_of(at_path(cfg, "model.head")) == WEFT_CFG_MAP);
	/* a sequence item by index */
	WT_OK(weft_config_override(cfg, "--model.hidden.1=32"));
	WT_CHECK(strcmp(weft_cfg_scalar(at_path(cfg, "model.hidden.1")), "32") == 0);
	/* an empty value is null */
	WT_OK(weft_config_override(cfg, "--trainer.strategy="));
	WT_CHECK(weft_cfg_kind_of(at_path(cfg, "trainer.strategy")) == WEFT_CFG_NULL);
	WT_CHECK(at_path(cfg, "trainer.strategy") != NULL);
	/* the value may contain '=' */
	/* any printable UTF-8 is a key */
	WT_OK(weft_config_override(cfg, "--data.caf\xc3\xa9=1"));
	WT_CHECK(strcmp(weft_cfg_scalar(at_path(cfg, "data.caf\xc3\xa9")), "1") == 0);
	WT_OK(weft_config_override(cfg, "--data.filter=a=b"));
	WT_CHECK(strcmp(weft_cfg_scalar(at_path(cfg, "data.filter")), "a=b") == 0);
	weft_config_free(cfg);
}

static void test_flow_values(void)
{
	weft_config *cfg = load(doc);
	const weft_cfg *n;

	WT_OK(weft_config_override(cfg, "--model.hidden=[256, 256, 10]"));
	n = at_path(cfg, "model.hidden");
	WT_CHECK(weft_cfg_kind_of(n) == WEFT_CFG_SEQ && weft_cfg_size(n) == 3);
	WT_CHECK(strcmp(where(weft_cfg_at(n, 2)), "<command line>:1:27") == 0);
	WT_CHECK(strcmp(path_of(weft_cfg_at(n, 2)), "model.hidden.2") == 0);
	WT_OK(weft_config_override(cfg, "--trainer.strategy={name: zero, stage: 2}"));
	n = at_path(cfg, "trainer.strategy.stage");
	WT_CHECK(strcmp(weft_cfg_scalar(n), "2") == 0);
	WT_CHECK(strcmp(path_of(n), "trainer.strategy.stage") == 0);
	WT_CHECK(strcmp(where(n), "<command line>:1:40") == 0);
	/* the key keeps its place in the file */
	WT_CHECK(strcmp(weft_cfg_key_at(at_path(cfg, "trainer"), 1), "strategy") == 0);
	weft_config_free(cfg);
}

static void test_errors(void)
{
	weft_config *cfg = load(doc);
	char before[4096], *text;

	WT_OK(weft_config_to_string(cfg, &text));
	snprintf(before, sizeof(before), "%s", text);
	free(text);
	WT_FAILS(weft_config_override(cfg, "--trainer.devices"), WEFT_ERR_CONFIG,
		 "override '--trainer.devices'", "expected KEY=VALUE", "--trainer.devices=2");
	WT_FAILS(weft_config_override(cfg, "--=3"), WEFT_ERR_CONFIG, "override '--=3'",
		 "key before '=' is empty");
	WT_FAILS(weft_config_override(cfg, "--trainer..devices=3"), WEFT_ERR_CONFIG,
		 "override '--trainer..devices=3'", "empty key at column 11");
	WT_FAILS(weft_config_override(cfg, "--trainer.=3"), WEFT_ERR_CONFIG, "empty key at column 11");
	/* keys do not go through the YAML reader: they are checked here */
	WT_FAILS(weft_config_override(cfg, "--trainer.d\xffx=3"), WEFT_ERR_CONFIG,
		 "byte 0xff at column 12", "not printable UTF-8");
	WT_FAILS(weft_config_override(cfg, "--trainer.d\x01x=3"), WEFT_ERR_CONFIG,
		 "byte 0x01 at column 12");
	WT_FAILS(weft_config_override(cfg, "--trainer.d\xe2\x80=3"), WEFT_ERR_CONFIG,
		 "byte 0xe2 at column 12");
	WT_FAILS(weft_config_override(cfg, "--trainer.devices.count=3"), WEFT_ERR_CONFIG,
		 "override '--trainer.devices.count=3'",
		 "'trainer.devices' is a value ('1' at cfg.yaml:2:12), not a mapping",
		 "cannot hold 'count'");
	WT_FAILS(weft_config_override(cfg, "--model.hidden.5=1"), WEFT_ERR_CONFIG,
		 "'model.hidden' is a sequence of 2 items", "'5' is not an index");
	WT_FAILS(weft_config_override(cfg, "--model.hidden.x.y=1"), WEFT_ERR_CONFIG,
		 "'x' is not an index");
	{
		char deep[1024] = "--";

		for (int i = 0; i < 300; i++)
			strcat(deep, "a.");
		strcat(deep, "b=1");
		WT_FAILS(weft_config_override(cfg, deep), WEFT_ERR_CONFIG,
			 "the path has more than 256 keys");
	}
	WT_FAILS(weft_config_override(cfg, "--model.hidden=[1, 2"), WEFT_ERR_CONFIG,
		 "override '--model.hidden=[1, 2': <command line>:",
		 "did not find expected ',' or ']'", "started at line 1, column 16");
	/* nothing changed by the failed overrides */
	WT_OK(weft_config_to_string(cfg, &text));
	WT_CHECK(strcmp(before, text) == 0);
	free(text);
	weft_config_free(cfg);
}

/* An override is user input: a misspelt key is reported where it was typed. */
/* Keys are not cut at any length (the fuzzer found a 256-byte cut that
 * split a UTF-8 character and broke the written YAML). */
static void test_long_key(void)
{
	weft_config *cfg = load(doc), *again = NULL;
	char arg[700] = "--", key[700] = "";
	char *text;

	for (int i = 0; i < 254; i++)
		strcat(key, "k");
	strcat(key, "\xef\xbb\xbf\xc3\xa9"); /* U+FEFF then e-acute across byte 256 */
	strcat(arg, key);
	strcat(arg, "=1");
	WT_OK(weft_config_override(cfg, arg));
	WT_CHECK(weft_cfg_get(weft_config_root(cfg), key) != NULL);
	WT_OK(weft_config_to_string(cfg, &text));
	WT_OK(weft_config_load_string("out.yaml", text, strlen(text), &again));
	WT_CHECK(same_tree(weft_config_root(cfg), weft_config_root(again)));
	WT_CHECK(weft_cfg_get(weft_config_root(again), key) != NULL);
	free(text);
	weft_config_free(again);
	weft_config_free(cfg);
}

static void test_override_is_checked(void)
{
	weft_config *cfg = load(doc);
	const weft_cfg *t;
	int64_t v;

	WT_OK(weft_config_override(cfg, "--trainer.devics=2"));
	t = at_path(cfg, "trainer");
	WT_OK(weft_cfg_int(t, "devices", 1, &v));
	WT_CHECK(v == 1);
	weft_cfg_get(t, "strategy");
	weft_cfg_mark_used(at_path(cfg, "model"));
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG,
		 "<command line>:1:11: unknown key 'devics' in 'trainer' (did you mean 'devices'?)");
	weft_config_free(cfg);
}

static void test_set(void)
{
	weft_config *cfg = load(doc);
	const weft_cfg *old = at_path(cfg, "trainer.devices");
	const weft_cfg *n;

	WT_OK(weft_config_set(cfg, "trainer.devices", "8"));
	/* a node handed out before stays valid */
	WT_CHECK(strcmp(weft_cfg_scalar(old), "1") == 0);
	WT_CHECK(strcmp(weft_cfg_scalar(at_path(cfg, "trainer.devices")), "8") == 0);
	WT_OK(weft_config_set(cfg, "run.dir", "runs/1"));
	n = weft_cfg_get(weft_cfg_get(weft_config_root(cfg), "run"), "dir");
	WT_CHECK(strcmp(where(n), "<default>:1:1") == 0);
	/* values set by code count as read */
	weft_cfg_get(at_path(cfg, "trainer"), "strategy");
	weft_cfg_mark_used(at_path(cfg, "model"));
	WT_OK(weft_config_check_unused(cfg));
	WT_FAILS(weft_config_set(cfg, "trainer.devices.x", "1"), WEFT_ERR_CONFIG,
		 "setting 'trainer.devices.x' to '1'", "'trainer.devices' is a value");
	WT_FAILS(weft_config_set(cfg, "", "1"), WEFT_ERR_CONFIG, "the path is empty");
	weft_config_free(cfg);
}

/* A subtree from another document keeps its own places, stays valid after
 * that document is freed, and its keys count as unread. */
static void test_graft(void)
{
	static const char other[] = "{\"zero\": {\"stage\": 2,\n \"stag\": 1}}";
	weft_config *cfg = load(doc), *src = NULL;
	const weft_cfg *n;

	WT_OK(weft_config_load_string("ds.json", other, strlen(other), &src));
	WT_OK(weft_config_graft(cfg, "trainer.zero", at_path(src, "zero")));
	weft_config_free(src);
	n = at_path(cfg, "trainer.zero.stage");
	WT_CHECK(n && strcmp(weft_cfg_scalar(n), "2") == 0);
	WT_CHECK(strcmp(where(n), "ds.json:1:20") == 0);
	weft_cfg_get(at_path(cfg, "trainer"), "strategy");
	weft_cfg_get(at_path(cfg, "trainer"), "devices");
	weft_cfg_mark_used(at_path(cfg, "model"));
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG,
		 "ds.json:2:2: unknown key 'stag' in 'trainer.zero' (did you mean 'stage'?)");
	WT_FAILS(weft_config_graft(cfg, "trainer.devices.x", at_path(cfg, "model")),
		 WEFT_ERR_CONFIG, "'trainer.devices' is a value");
	weft_config_free(cfg);
}

int main(void)
{
	test_scalars_and_new_sections();
	test_flow_values();
	test_errors();
	test_long_key();
	test_override_is_checked();
	test_set();
	test_graft();
	return wt_done("test_config_override");
}
