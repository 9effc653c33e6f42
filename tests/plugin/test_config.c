/* The config's `plugins:` section: paths relative to the config file's
 * directory, explicit files, wrong types and missing paths reported at
 * file:line:col, and unknown keys caught by the config's strictness. */
#include <string.h>

#include "plugin/registry.h"
#include "weft_test.h"

#define FX(rel) FX_DIR "/" rel

static weft_config *load(const char *text)
{
	weft_config *cfg;

	WT_OK(weft_config_load_string("cfg.yaml", text, strlen(text), &cfg));
	return cfg;
}

/* Configures a fresh registry from `text`'s plugins section relative to
 * FX_DIR; returns the status, the message stays in the last error. */
static weft_status configure(const char *text)
{
	weft_config *cfg = load(text);
	weft_registry *reg;
	weft_status st;

	WT_OK(weft_registry_create(&reg));
	st = weft_registry_configure_from_config(reg, weft_cfg_get(weft_config_root(cfg), "plugins"),
						 FX_DIR);
	weft_registry_free(reg);
	weft_config_free(cfg);
	return st;
}

static void test_paths_and_load(void)
{
	const char *text = "plugins:\n"
			   "  paths: [good, ./shadow_b]\n"
			   "  load: shadow_a/fx_shadow.so\n"
			   "  laod: [newer_minor/fx_newer.so]\n";
	const weft_registry_shadowed *sh;
	weft_config *cfg = load(text);
	const char *const *dirs;
	weft_registry *reg;
	const char *file;
	const void *vt;
	size_t n;

	WT_OK(weft_registry_create(&reg));
	WT_OK(weft_registry_configure_from_config(reg, weft_cfg_get(weft_config_root(cfg), "plugins"),
						  FX_DIR));
	dirs = weft_registry_dirs(reg, &n);
	WT_REQUIRE(n == 2);
	WT_CHECK(!strcmp(dirs[0], FX("good")));
	WT_CHECK(!strcmp(dirs[1], FX("./shadow_b")));
	/* the explicit file comes before the directories */
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "layered", &vt, &file));
	WT_CHECK(!strcmp(file, FX("shadow_a/fx_shadow.so")));
	sh = weft_registry_shadowed_files(reg, &n);
	WT_REQUIRE(n == 1);
	WT_CHECK(!strcmp(sh[0].file, FX("./shadow_b/fx_shadow.so")));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "mirror", &vt, &file));
	WT_CHECK(!strcmp(file, FX("good/fx_good.so")));
	/* the misspelt key was never read: strictness names it */
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG, "cfg.yaml:4:3",
		 "unknown key 'laod'", "did you mean 'load'?");
	weft_registry_free(reg);
	weft_config_free(cfg);
}

static void test_absolute_and_empty(void)
{
	weft_config *cfg = load("plugins:\n  paths: [" FX("good") "]\n  load: ~\n");
	weft_registry *reg;
	const char *const *dirs;
	size_t n;

	WT_OK(weft_registry_create(&reg));
	/* absolute paths ignore the config dir; a null list adds nothing */
	WT_OK(weft_registry_configure_from_config(reg, weft_cfg_get(weft_config_root(cfg), "plugins"),
						  "/nonexistent"));
	dirs = weft_registry_dirs(reg, &n);
	WT_REQUIRE(n == 1);
	WT_CHECK(!strcmp(dirs[0], FX("good")));
	WT_OK(weft_config_check_unused(cfg));
	/* no plugins section at all */
	WT_OK(weft_registry_configure_from_config(reg, NULL, FX_DIR));
	weft_registry_free(reg);
	weft_config_free(cfg);
}

static void test_errors(void)
{
	WT_FAILS(configure("plugins:\n  paths: [good, nowhere]\n"), WEFT_ERR_NOT_FOUND,
		 "cfg.yaml:2:17: 'nowhere' (relative to " FX_DIR ")",
		 "plugin directory " FX("nowhere") " cannot be read");
	WT_FAILS(configure("plugins:\n  load: [gone.so]\n"), WEFT_ERR_NOT_FOUND,
		 "cfg.yaml:2:10: 'gone.so'", "plugin file " FX("gone.so") " cannot be read");
	WT_FAILS(configure("plugins:\n  paths: {a: b}\n"), WEFT_ERR_CONFIG, "cfg.yaml:2:10",
		 "must be a path or a list of paths");
	WT_FAILS(configure("plugins:\n  paths: [[good]]\n"), WEFT_ERR_CONFIG, "cfg.yaml:2:11");
	WT_FAILS(configure("plugins:\n  paths: ['']\n"), WEFT_ERR_CONFIG, "cfg.yaml:2:11",
		 "is an empty path");
	WT_FAILS(configure("plugins: [good]\n"), WEFT_ERR_CONFIG, "cfg.yaml:1:10",
		 "must be a mapping with 'paths' (directories) and/or 'load' (plugin files)");
}

/* An explicit file that cannot load is fatal, with its reason. */
static void test_load_is_fatal(void)
{
	weft_config *cfg = load("plugins:\n  paths: [good]\n  load: [short/fx_short.so]\n");
	weft_registry *reg;
	const void *vt;

	WT_OK(weft_registry_create(&reg));
	WT_OK(weft_registry_configure_from_config(reg, weft_cfg_get(weft_config_root(cfg), "plugins"),
						  FX_DIR));
	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "mirror", &vt, NULL), WEFT_ERR_ABI,
		 "strategy plugin 'tiny' in " FX("short/fx_short.so"), "struct_size 8");
	weft_registry_free(reg);
	weft_config_free(cfg);
}

int main(void)
{
	test_paths_and_load();
	test_absolute_and_empty();
	test_errors();
	test_load_is_fatal();
	return wt_done("plugin_config");
}
