/* `weft plugins`: lists the plugins this weft finds on its search path,
 * and the files it found but could not use, with the reason. */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "plugin/registry.h"
#include "weft/weft.h"

#define MAX_PATHS 64

static void plugins_usage(FILE *out)
{
	fprintf(out,
		"usage: weft plugins [--path DIR]... [--config FILE]\n"
		"\n"
		"Lists every plugin found. Search order: the config's plugins.load files,\n"
		"then the --path directories, the config's plugins.paths, WEFT_PLUGIN_PATH,\n"
		"the build tree's plugin directory and the install directory; the first\n"
		"file of a given file name wins. Files that were found but could not be\n"
		"loaded are listed after the table, with the reason.\n");
}

/* The value of "--opt VALUE" or "--opt=VALUE" at argv[*i], or NULL when
 * argv[*i] is not that option. Advances *i past a separate value. */
static const char *option_value(int argc, char **argv, int *i, const char *opt, int *missing)
{
	size_t n = strlen(opt);

	if (strncmp(argv[*i], opt, n))
		return NULL;
	if (argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (argv[*i][n])
		return NULL;
	if (*i + 1 >= argc) {
		*missing = 1;
		return NULL;
	}
	return argv[++*i];
}

/* Adds the config file's plugins section (paths relative to its dir). */
static weft_status add_config(weft_registry *reg, const char *path)
{
	weft_config *cfg;
	char *copy;
	weft_status st;

	st = weft_config_load_file(path, &cfg);
	if (st != WEFT_OK)
		return st;
	copy = strdup(path);
	if (!copy) {
		weft_config_free(cfg);
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory reading %s", path);
	}
	st = weft_registry_configure_from_config(reg, weft_cfg_get(weft_config_root(cfg), "plugins"),
						 dirname(copy));
	free(copy);
	weft_config_free(cfg);
	return st;
}

static void print_table(const weft_registry_entry *e, size_t n)
{
	int wk = 4, wn = 4;

	for (size_t i = 0; i < n; i++) {
		int k = (int)strlen(weft_plugin_kind_name(e[i].kind));
		int m = (int)strlen(e[i].name);

		wk = k > wk ? k : wk;
		wn = m > wn ? m : wn;
	}
	printf("%-*s  %-*s  %-5s  %s\n", wk, "KIND", wn, "NAME", "ABI", "FILE");
	for (size_t i = 0; i < n; i++) {
		char abi[24];

		snprintf(abi, sizeof(abi), "%u.%u", WEFT_ABI_VERSION_MAJOR(e[i].abi_version),
			 WEFT_ABI_VERSION_MINOR(e[i].abi_version));
		printf("%-*s  %-*s  %-5s  %s\n", wk, weft_plugin_kind_name(e[i].kind), wn, e[i].name,
		       abi, e[i].file);
	}
	if (!n)
		printf("(no plugins found)\n");
}

static void print_notes(const weft_registry *reg)
{
	const weft_registry_failure *f;
	const weft_registry_shadowed *sh;
	const char *const *dirs;
	size_t nf, nsh, nd;

	dirs = weft_registry_dirs(reg, &nd);
	printf("\nsearched:");
	for (size_t i = 0; i < nd; i++)
		printf("%s %s", i ? "," : "", dirs[i]);
	printf("%s\n", nd ? "" : " no directories");

	f = weft_registry_failures(reg, &nf);
	if (nf)
		printf("\n%zu file%s failed to load:\n", nf, nf == 1 ? "" : "s");
	for (size_t i = 0; i < nf; i++)
		printf("  %s\n    %s\n", f[i].file, f[i].reason);

	sh = weft_registry_shadowed_files(reg, &nsh);
	if (nsh)
		printf("\n%zu file%s shadowed by an earlier file of the same name:\n", nsh,
		       nsh == 1 ? "" : "s");
	for (size_t i = 0; i < nsh; i++)
		printf("  %s (by %s)\n", sh[i].file, sh[i].by);
}

int weft_cmd_plugins(int argc, char **argv)
{
	const char *paths[MAX_PATHS];
	const char *config = NULL;
	const weft_registry_entry *e;
	weft_registry *reg = NULL;
	int npaths = 0, missing = 0, rc = 1;
	size_t n;

	for (int i = 1; i < argc; i++) {
		const char *v;

		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			plugins_usage(stdout);
			return 0;
		}
		if ((v = option_value(argc, argv, &i, "--path", &missing))) {
			if (npaths == MAX_PATHS) {
				fprintf(stderr, "weft plugins: at most %d --path options\n", MAX_PATHS);
				return 2;
			}
			paths[npaths++] = v;
			continue;
		}
		if ((v = option_value(argc, argv, &i, "--config", &missing))) {
			config = v;
			continue;
		}
		if (missing)
			fprintf(stderr, "weft plugins: %s needs a value\n", argv[i]);
		else
			fprintf(stderr, "weft plugins: unknown option '%s'\n", argv[i]);
		plugins_usage(stderr);
		return 2;
	}

	if (weft_registry_create(&reg) != WEFT_OK)
		return weft_cli_fail();
	for (int i = 0; i < npaths; i++) {
		if (weft_registry_add_dir(reg, paths[i]) != WEFT_OK)
			goto out_fail;
	}
	if (config && add_config(reg, config) != WEFT_OK)
		goto out_fail;
	if (weft_registry_add_default_paths(reg) != WEFT_OK)
		goto out_fail;
	if (weft_registry_list(reg, &e, &n) != WEFT_OK)
		goto out_fail;
	print_table(e, n);
	print_notes(reg);
	rc = 0;
	goto out_free_registry;

out_fail:
	rc = weft_cli_fail();
out_free_registry:
	weft_registry_free(reg);
	return rc;
}
