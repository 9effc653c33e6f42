/* libFuzzer target for core/config.
 *
 * Any bytes go to weft_config_load_string. A document that loads must
 * survive everything a reader does to it, and its canonical YAML must
 * parse back to the same text (a fixed point) with the same hash, before
 * and after overrides. A first line starting with '#' (a YAML comment) is
 * also applied as an override argument, so one input fuzzes both parsers.
 * Violations abort(); crashes, leaks and UB are caught by the sanitizers.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/config.h"

static const char *const choices[] = { "ddp", "zero_1", "zero_2", "tp", NULL };

/* Reads every other key (so check_unused has work) and converts scalars. */
static void read_tree(const weft_cfg *node)
{
	char buf[96];
	int64_t i;
	double d;
	int b, idx;
	const char *s;

	weft_cfg_where(node, buf, sizeof(buf));
	weft_cfg_path(node, buf, sizeof(buf));
	switch (weft_cfg_kind_of(node)) {
	case WEFT_CFG_SCALAR:
		(void)weft_cfg_as_int(node, &i);
		(void)weft_cfg_as_float(node, &d);
		(void)weft_cfg_as_bool(node, &b);
		(void)weft_cfg_as_str(node, &s);
		break;
	case WEFT_CFG_MAP:
		(void)weft_cfg_get(node, "strategy");
		(void)weft_cfg_choice(node, "name", choices, "ddp", &idx);
		for (size_t k = 0; k < weft_cfg_size(node); k += 2) {
			const char *key = weft_cfg_key_at(node, k);

			(void)weft_cfg_int(node, key, 0, &i);
			read_tree(weft_cfg_get(node, key));
		}
		break;
	case WEFT_CFG_SEQ:
		for (size_t k = 0; k < weft_cfg_size(node); k++)
			read_tree(weft_cfg_at(node, k));
		break;
	default:
		break;
	}
}

/* The canonical text must read back to itself, with the same hash. */
static void check_round_trip(const weft_config *cfg)
{
	weft_config *again = NULL;
	char *text = NULL, *text2 = NULL;

	if (weft_config_to_string(cfg, &text) != WEFT_OK)
		abort();
	if (weft_config_load_string("out.yaml", text, strlen(text), &again) != WEFT_OK) {
		fprintf(stderr, "written YAML does not parse: %s\n---\n%s---\n", weft_error_last(),
			text);
		abort();
	}
	if (weft_config_to_string(again, &text2) != WEFT_OK)
		abort();
	if (strcmp(text, text2) != 0) {
		fprintf(stderr, "not a fixed point:\n---\n%s---\n%s---\n", text, text2);
		abort();
	}
	if (weft_config_hash(cfg) != weft_config_hash(again))
		abort();
	free(text);
	free(text2);
	weft_config_free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	weft_config *cfg = NULL;
	char arg[512];
	size_t n = 0;

	if (weft_config_load_string("fuzz.yaml", (const char *)data, size, &cfg) != WEFT_OK)
		return 0;
	check_round_trip(cfg);
	read_tree(weft_config_root(cfg));
	(void)weft_config_check_unused(cfg);

	if (size > 1 && data[0] == '#') {
		while (n + 1 < size && n < sizeof(arg) - 1 && data[n + 1] != '\n' && data[n + 1])
			arg[n] = (char)data[n + 1], n++;
		arg[n] = '\0';
		(void)weft_config_override(cfg, arg);
	}
	(void)weft_config_override(cfg, "--trainer.strategy={name: zero, stage: [1, 2]}");
	(void)weft_config_override(cfg, "model.hidden.0=7");
	(void)weft_config_set(cfg, "run.dir", "'runs/x'");
	check_round_trip(cfg);
	read_tree(weft_config_root(cfg));

	weft_cfg_mark_used(weft_config_root(cfg));
	if (weft_config_check_unused(cfg) != WEFT_OK)
		abort();
	weft_config_free(cfg);
	return 0;
}
