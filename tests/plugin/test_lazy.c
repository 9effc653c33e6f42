/* Plugin discovery that runs no code it does not need, and refuses places
 * anyone could write to:
 *   - the scan reads each file's names section (WEFT_PLUGIN_NAMES) without
 *     loading it: looking up 'named' loads fx_lazy_named.so only, and the
 *     constructor of fx_lazy_ctor.so (it creates a marker file) has not run;
 *     looking up 'ctor_probe' then loads it (the marker appears);
 *   - a file whose entry returns a plugin its names section does not
 *     declare is refused with a message naming the file and the plugin;
 *   - a directory or a file writable by every user is refused, as is one
 *     owned by another user (root only: it needs chown), each with the
 *     reason and the fix, and nothing in it is loaded;
 *   - files without a names section (built before ABI 1.3) are still
 *     found, loaded when a name is not among the declared ones;
 *   - the section reader: names from a real plugin, "none" for a shared
 *     object without one, an error for a file that is not ELF, and the
 *     word parser's refusals.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/registry.h"
#include "plugin/registry_impl.h"
#include "weft_test.h"

#define FX(rel) FX_DIR "/" rel

static char scratch[256];

static void sh(const char *fmt, const char *a, const char *b)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), fmt, a, b);
	WT_REQUIRE(system(cmd) == 0);
}

static weft_registry *with_dir(const char *dir)
{
	weft_registry *reg;

	WT_OK(weft_registry_create(&reg));
	WT_OK(weft_registry_add_dir(reg, dir));
	return reg;
}

static void test_loads_only_what_is_named(void)
{
	char marker[300];
	weft_registry *reg;
	const void *vt;
	const char *file;

	snprintf(marker, sizeof(marker), "%s/ctor-ran", scratch);
	setenv("FX_CTOR_MARKER", marker, 1);
	reg = with_dir(FX("lazy"));
	WT_OK(weft_registry_scan(reg));
	WT_CHECK(access(marker, F_OK) != 0);
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "named", &vt, &file));
	WT_STR_CONTAINS(file, "fx_lazy_named.so");
	WT_CHECK(!strcmp(((const weft_plugin_head *)vt)->name, "named"));
	WT_CHECK(access(marker, F_OK) != 0); /* the other file's code never ran */
	/* a name nobody declares: the suggestions come from the names sections */
	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "ctor_prob", &vt, NULL),
		 WEFT_ERR_NOT_FOUND, "did you mean 'ctor_probe'?");
	WT_CHECK(access(marker, F_OK) != 0);
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "ctor_probe", &vt, &file));
	WT_STR_CONTAINS(file, "fx_lazy_ctor.so");
	WT_CHECK(access(marker, F_OK) == 0);
	weft_registry_free(reg);
}

static void test_undeclared_plugin_refused(void)
{
	weft_registry *reg = with_dir(FX("liar"));
	const void *vt;

	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "claimed", &vt, NULL),
		 WEFT_ERR_PLUGIN, "fx_lazy_liar.so", "the strategy plugin 'actual'",
		 "does not declare");
	weft_registry_free(reg);
}

static void test_unsafe_places(void)
{
	char dir[300], file[400];
	weft_registry *reg;
	const void *vt;

	/* a world-writable directory: refused with the reason, nothing loads */
	snprintf(dir, sizeof(dir), "%s/open", scratch);
	sh("mkdir -p %s && cp " FX("lazy") "/fx_lazy_named.so %s/", dir, dir);
	WT_REQUIRE(chmod(dir, 0777) == 0);
	reg = with_dir(dir);
	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "named", &vt, NULL),
		 WEFT_ERR_NOT_FOUND, dir, "writable by every user (mode 0777)", "chmod o-w");
	weft_registry_free(reg);
	/* a safe directory, but the file is world-writable */
	WT_REQUIRE(chmod(dir, 0755) == 0);
	snprintf(file, sizeof(file), "%s/fx_lazy_named.so", dir);
	WT_REQUIRE(chmod(file, 0666) == 0);
	reg = with_dir(dir);
	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "named", &vt, NULL),
		 WEFT_ERR_NOT_FOUND, file, "writable by every user (mode 0666)");
	weft_registry_free(reg);
	/* the same file made private loads */
	WT_REQUIRE(chmod(file, 0644) == 0);
	reg = with_dir(dir);
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "named", &vt, NULL));
	weft_registry_free(reg);
	/* an explicit file is held to the same rule, fatally */
	WT_REQUIRE(chmod(file, 0666) == 0);
	WT_OK(weft_registry_create(&reg));
	WT_OK(weft_registry_add_file(reg, file));
	WT_FAILS(weft_registry_scan(reg), WEFT_ERR_PLUGIN, "writable by every user");
	weft_registry_free(reg);
	WT_REQUIRE(chmod(file, 0644) == 0);
	/* owned by another user: only root can make that here */
	if (geteuid() == 0) {
		WT_REQUIRE(chown(file, 4242, 4242) == 0);
		reg = with_dir(dir);
		WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "named", &vt, NULL),
			 WEFT_ERR_NOT_FOUND, file, "belongs to user id 4242");
		weft_registry_free(reg);
	} else {
		printf("ownership case skipped: it needs root to chown\n");
	}
}

static void test_legacy_files_still_found(void)
{
	/* fx_good.so and fx_extra.so have no names section */
	weft_registry *reg = with_dir(FX("good"));
	const void *vt;

	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_OPTIM, "momentum", &vt, NULL));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "mirror", &vt, NULL));
	weft_registry_free(reg);
}

static void test_section_reader(void)
{
	char *text = NULL, name[64], path[300];
	const char *cur;
	weft_plugin_kind kind;

	WT_CHECK(weft_plugin_read_names(FX("lazy/fx_lazy_named.so"), &text) == 1);
	WT_REQUIRE(text);
	cur = text;
	WT_CHECK(weft_plugin_next_name(&cur, &kind, name, sizeof(name)) == 1);
	WT_CHECK(kind == WEFT_PLUGIN_STRATEGY && !strcmp(name, "named"));
	WT_CHECK(weft_plugin_next_name(&cur, &kind, name, sizeof(name)) == 0);
	free(text);
	WT_CHECK(weft_plugin_read_names(FX("good/fx_good.so"), &text) == 0 && !text);
	snprintf(path, sizeof(path), "%s/not-elf.so", scratch);
	sh("printf 'hello' > %s%s", path, "");
	WT_CHECK(weft_plugin_read_names(path, &text) == -1 && !text);
	cur = "weft-plugins 1\nstrategy:a gadget:b";
	WT_CHECK(weft_plugin_next_name(&cur, &kind, name, sizeof(name)) == 1);
	WT_CHECK(weft_plugin_next_name(&cur, &kind, name, sizeof(name)) == -1);
	cur = "nocolon";
	WT_CHECK(weft_plugin_next_name(&cur, &kind, name, sizeof(name)) == -1);
	cur = "comm:";
	WT_CHECK(weft_plugin_next_name(&cur, &kind, name, sizeof(name)) == -1);
}

int main(void)
{
	snprintf(scratch, sizeof(scratch), "/tmp/weft-plugin-lazy-%d", (int)getpid());
	WT_REQUIRE(mkdir(scratch, 0700) == 0);
	test_loads_only_what_is_named();
	test_undeclared_plugin_refused();
	test_unsafe_places();
	test_legacy_files_still_found();
	test_section_reader();
	sh("rm -rf %s%s", scratch, "");
	return wt_done("plugin_lazy");
}
