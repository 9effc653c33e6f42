/* The plugin registry: loading, every refusal and its message, lookup with
 * did-you-mean, search order and precedence, WEFT_PLUGIN_PATH.
 *
 * The fixture plugins live in FX_DIR/<case>/ (tests/plugin/CMakeLists.txt;
 * tests/plugin/fixtures/ explains each case). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/registry.h"
#include "weft/comm.h"
#include "weft/optim.h"
#include "weft/strategy.h"
#include "weft_test.h"

#define FX(rel) FX_DIR "/" rel
#define ABI_STR2(x) #x
#define ABI_STR(x) ABI_STR2(x)
/* "this weft has ABI <major>.<minor>" as the loader words it */
#define THIS_ABI "this weft has ABI " ABI_STR(WEFT_ABI_MAJOR) "." ABI_STR(WEFT_ABI_MINOR)

static weft_registry *make(void)
{
	weft_registry *reg;

	WT_OK(weft_registry_create(&reg));
	return reg;
}

/* A registry with one explicit file; returns its scan's status, leaving the
 * message in the last error. */
static weft_status scan_file(const char *path)
{
	weft_registry *reg = make();
	weft_status st = weft_registry_add_file(reg, path);

	if (st == WEFT_OK)
		st = weft_registry_scan(reg);
	weft_registry_free(reg);
	return st;
}

static void test_good_dir(void)
{
	weft_registry *reg = make();
	const weft_registry_entry *e;
	const weft_optim_ops *optim;
	const weft_comm_ops *comm;
	const void *vt;
	const char *file;
	size_t n, nfail;

	WT_OK(weft_registry_add_dir(reg, FX("good")));
	WT_OK(weft_registry_list(reg, &e, &n));
	/* fx_good.so: loopback, mirror, shard, plainsgd; fx_extra.so: momentum;
	 * sorted by kind (comm, strategy, optim), then name */
	WT_REQUIRE(n == 5);
	WT_CHECK(e[0].kind == WEFT_PLUGIN_COMM && !strcmp(e[0].name, "loopback"));
	WT_CHECK(e[1].kind == WEFT_PLUGIN_STRATEGY && !strcmp(e[1].name, "mirror"));
	WT_CHECK(e[2].kind == WEFT_PLUGIN_STRATEGY && !strcmp(e[2].name, "shard"));
	WT_CHECK(e[3].kind == WEFT_PLUGIN_OPTIM && !strcmp(e[3].name, "momentum"));
	WT_CHECK(e[4].kind == WEFT_PLUGIN_OPTIM && !strcmp(e[4].name, "plainsgd"));
	WT_CHECK(!strcmp(e[0].file, FX("good/fx_good.so")));
	WT_CHECK(!strcmp(e[3].file, FX("good/fx_extra.so")));
	WT_CHECK(!strcmp(e[3].package, "fixture-extra"));
	WT_CHECK(!strcmp(e[4].package, "fixture-good"));
	for (size_t i = 0; i < n; i++)
		WT_CHECK(e[i].abi_version == WEFT_ABI_VERSION);
	weft_registry_failures(reg, &nfail);
	WT_CHECK(nfail == 0);

	/* calls through the vtables reach the right shared object */
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_OPTIM, "plainsgd", &vt, &file));
	optim = vt;
	WT_CHECK(optim->state_slots(NULL) == 0);
	WT_CHECK(!strcmp(file, FX("good/fx_good.so")));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_OPTIM, "momentum", &vt, NULL));
	optim = vt;
	WT_CHECK(optim->state_slots(NULL) == 1);
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_COMM, "loopback", &vt, NULL));
	comm = vt;
	WT_CHECK(comm->size(NULL) == 1 && comm->rank(NULL) == 0);
	weft_registry_free(reg);
}

static void test_not_found(void)
{
	weft_registry *reg = make();
	const void *vt = NULL;

	WT_OK(weft_registry_add_dir(reg, FX("good")));
	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "mirorr", &vt, NULL),
		 WEFT_ERR_NOT_FOUND, "no strategy plugin named 'mirorr'",
		 "(did you mean 'mirror'?)", "available: mirror, shard",
		 "searched: " FX("good"));
	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_OPTIM, "plainsdg", &vt, NULL),
		 WEFT_ERR_NOT_FOUND, "did you mean 'plainsgd'?",
		 "available: momentum, plainsgd");
	/* names match exactly, but the suggestion ignores case */
	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "Mirror", &vt, NULL),
		 WEFT_ERR_NOT_FOUND, "no strategy plugin named 'Mirror' (did you mean 'mirror'?)");
	/* nothing close: no suggestion */
	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "pipeline", &vt, NULL),
		 WEFT_ERR_NOT_FOUND, "no strategy plugin named 'pipeline'; available:");
	/* the name exists under another kind */
	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "loopback", &vt, NULL),
		 WEFT_ERR_NOT_FOUND, "(there is a comm plugin of that name)");
	WT_CHECK(vt == NULL);
	WT_FAILS(weft_registry_find(reg, (weft_plugin_kind)9, "mirror", &vt, NULL),
		 WEFT_ERR_INVALID_ARG, "unknown kind 9");
	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, NULL, &vt, NULL),
		 WEFT_ERR_INVALID_ARG, "without a name");
	weft_registry_free(reg);

	reg = make();
	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_COMM, "gloo", &vt, NULL), WEFT_ERR_NOT_FOUND,
		 "no comm plugin named 'gloo'; available: none",
		 "searched: no directories", "WEFT_PLUGIN_PATH");
	weft_registry_free(reg);
}

/* A non-ELF file named x.so, written by the test into a fresh directory. */
static void make_non_elf(char *dir, size_t dlen, char *path, size_t plen)
{
	FILE *f;

	snprintf(dir, dlen, "plugin_registry_XXXXXX");
	WT_REQUIRE(mkdtemp(dir) != NULL);
	snprintf(path, plen, "%s/x.so", dir);
	f = fopen(path, "w");
	WT_REQUIRE(f != NULL);
	/* longer than an ELF header, so the loader reads and rejects it */
	fputs("this is a text file that someone named x.so; it is not a shared object\n"
	      "and a plugin loader must say so instead of crashing\n", f);
	fclose(f);
}

static void test_refusals(void)
{
	char want[256], dir[64], bad[128];
	size_t min = weft_plugin_min_struct_size(WEFT_PLUGIN_STRATEGY);

	WT_FAILS(scan_file(FX("abi_major/fx_abi2.so")), WEFT_ERR_ABI,
		 "plugin " FX("abi_major/fx_abi2.so") " was built for weft plugin ABI 2.0",
		 THIS_ABI, "rebuild it against this weft's SDK");
	WT_FAILS(scan_file(FX("abi_vtable/fx_abi_vtable.so")), WEFT_ERR_ABI,
		 FX("abi_vtable/fx_abi_vtable.so"), "(strategy plugin 'future')",
		 "was built for weft plugin ABI 2.0", THIS_ABI, "rebuild");
	WT_FAILS(scan_file(FX("no_entry/fx_noentry.so")), WEFT_ERR_PLUGIN,
		 FX("no_entry/fx_noentry.so"), "does not export the entry symbol 'weft_plugin_entry'",
		 "WEFT_PLUGIN_ENTRY(host)");
	WT_FAILS(scan_file(FX("null_entry/fx_null.so")), WEFT_ERR_PLUGIN,
		 FX("null_entry/fx_null.so"), "weft_plugin_entry() returned NULL",
		 "it said: fixture-variant needs a device this machine lacks");
	snprintf(want, sizeof(want), "needs at least %zu bytes for a strategy vtable", min);
	WT_FAILS(scan_file(FX("short/fx_short.so")), WEFT_ERR_ABI,
		 "strategy plugin 'tiny' in " FX("short/fx_short.so"), "has struct_size 8", want);
	/* each kind has its own minimum: 24 bytes hold the head and more, but
	 * not every member of weft_comm_ops at ABI 1.0 */
	snprintf(want, sizeof(want), "needs at least %u bytes for a comm vtable",
		 (unsigned)WEFT_COMM_OPS_MIN_SIZE);
	WT_FAILS(scan_file(FX("short_comm/fx_short_comm.so")), WEFT_ERR_ABI,
		 "comm plugin 'halfcomm' in " FX("short_comm/fx_short_comm.so"),
		 "has struct_size 24", want);
	WT_FAILS(scan_file(FX("no_name/fx_noname.so")), WEFT_ERR_PLUGIN, FX("no_name/fx_noname.so"),
		 "the strategy plugin at item 0 has no name (head.name is NULL)",
		 "WEFT_PLUGIN_HEAD");
	WT_FAILS(scan_file(FX("bad_kind/fx_badkind.so")), WEFT_ERR_PLUGIN,
		 FX("bad_kind/fx_badkind.so"), "item 0 has unknown kind 7",
		 "comm (1), strategy (2), optim (3), callback (4) and model (5)");
	WT_FAILS(scan_file(FX("unloadable/fx_undef.so")), WEFT_ERR_PLUGIN,
		 "cannot load plugin file " FX("unloadable/fx_undef.so"),
		 "undefined symbol: weft_fixture_symbol_nobody_defines", "install it");

	make_non_elf(dir, sizeof(dir), bad, sizeof(bad));
	WT_FAILS(scan_file(bad), WEFT_ERR_PLUGIN, "cannot load plugin file ", bad,
		 "invalid ELF header");
	unlink(bad);
	rmdir(dir);

	WT_FAILS(scan_file(FX("good/absent.so")), WEFT_ERR_NOT_FOUND,
		 "plugin file " FX("good/absent.so") " cannot be read: No such file");
	WT_FAILS(scan_file(FX("good")), WEFT_ERR_NOT_FOUND,
		 "plugin file " FX("good") " is not a regular file");
}

/* A fatal scan stays fatal: later lookups repeat the same message. */
static void test_fatal_scan_repeats(void)
{
	weft_registry *reg = make();
	const void *vt;

	WT_OK(weft_registry_add_file(reg, FX("unloadable/fx_undef.so")));
	WT_OK(weft_registry_add_dir(reg, FX("good")));
	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "mirror", &vt, NULL),
		 WEFT_ERR_PLUGIN, FX("unloadable/fx_undef.so"), "undefined symbol");
	weft_error_clear();
	WT_FAILS(weft_registry_scan(reg), WEFT_ERR_PLUGIN, FX("unloadable/fx_undef.so"));
	WT_FAILS(weft_registry_add_dir(reg, FX("shadow_a")), WEFT_ERR_INVALID_ARG,
		 "cannot add the plugin directory " FX("shadow_a"), "already scanned");
	weft_registry_free(reg);
}

/* Files found by scanning that fail are recorded, not fatal. */
static void test_scan_failures_recorded(void)
{
	static const char *const bad_dirs[] = { "abi_major", "abi_vtable", "no_entry",
						"null_entry", "short", "no_name",
						"bad_kind", "unloadable" };
	const size_t nbad = sizeof(bad_dirs) / sizeof(bad_dirs[0]);
	const weft_registry_failure *f;
	weft_registry *reg = make();
	char dir[256];
	const void *vt;
	const char *file;
	size_t n;

	WT_OK(weft_registry_add_dir(reg, FX("good")));
	WT_OK(weft_registry_add_dir(reg, FX("unloadable")));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "mirror", &vt, &file));
	WT_CHECK(!strcmp(file, FX("good/fx_good.so")));
	f = weft_registry_failures(reg, &n);
	WT_REQUIRE(n == 1);
	WT_CHECK(!strcmp(f[0].file, FX("unloadable/fx_undef.so")));
	WT_CHECK(f[0].status == WEFT_ERR_PLUGIN);
	WT_STR_CONTAINS(f[0].reason, "undefined symbol");
	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "dpp", &vt, NULL),
		 WEFT_ERR_NOT_FOUND, "available: mirror, shard",
		 "searched: " FX("good") ", " FX("unloadable"),
		 "; also, 1 file failed to load: " FX("unloadable/fx_undef.so")
		 ": cannot load plugin file",
		 "weft_fixture_symbol_nobody_defines");
	weft_registry_free(reg);

	reg = make();
	for (size_t i = 0; i < nbad; i++) {
		snprintf(dir, sizeof(dir), "%s/%s", FX_DIR, bad_dirs[i]);
		WT_OK(weft_registry_add_dir(reg, dir));
	}
	WT_OK(weft_registry_add_dir(reg, FX("good")));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_OPTIM, "momentum", &vt, NULL));
	f = weft_registry_failures(reg, &n);
	WT_REQUIRE(n == nbad);
	for (size_t i = 0; i < nbad; i++) {
		snprintf(dir, sizeof(dir), "%s/%s/", FX_DIR, bad_dirs[i]);
		WT_CHECK(!strncmp(f[i].file, dir, strlen(dir)));
		WT_STR_CONTAINS(f[i].reason, f[i].file);
	}
	WT_CHECK(f[0].status == WEFT_ERR_ABI);
	WT_CHECK(f[4].status == WEFT_ERR_ABI);
	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "dpp", &vt, NULL),
		 WEFT_ERR_NOT_FOUND, "also, 8 files failed to load:", "ABI 2.0",
		 "struct_size 8", "returned NULL");
	weft_registry_free(reg);
}

static void test_duplicates(void)
{
	const weft_registry_entry *e;
	const weft_registry_shadowed *sh;
	weft_registry *reg = make();
	const void *vt;
	size_t n, nfail, nsh;

	WT_OK(weft_registry_add_dir(reg, FX("dup")));
	WT_FAILS(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "twin", &vt, NULL), WEFT_ERR_PLUGIN,
		 "two files provide the strategy plugin 'twin': " FX("dup/fx_dup_a.so") " and "
		 FX("dup/fx_dup_b.so"),
		 "remove one of them");
	weft_registry_free(reg);

	/* across an explicit file and a directory: still fatal, both named */
	reg = make();
	WT_OK(weft_registry_add_file(reg, FX("dup/fx_dup_b.so")));
	WT_OK(weft_registry_add_dir(reg, FX("good")));
	WT_OK(weft_registry_add_dir(reg, FX("dup")));
	WT_FAILS(weft_registry_list(reg, &e, &n), WEFT_ERR_PLUGIN,
		 FX("dup/fx_dup_b.so") " and " FX("dup/fx_dup_a.so"));
	WT_CHECK(n == 0);
	weft_registry_free(reg);

	/* the same file reached twice (explicitly and through its directory,
	 * or one directory added twice) is not a clash */
	reg = make();
	WT_OK(weft_registry_add_file(reg, FX("good/fx_good.so")));
	WT_OK(weft_registry_add_dir(reg, FX("good")));
	WT_OK(weft_registry_add_dir(reg, FX("good/.")));
	WT_OK(weft_registry_list(reg, &e, &n));
	WT_CHECK(n == 5);
	weft_registry_failures(reg, &nfail);
	sh = weft_registry_shadowed_files(reg, &nsh);
	WT_CHECK(nfail == 0 && nsh == 0 && sh == NULL);
	weft_registry_free(reg);
}

/* The first of two files with the same file name wins, in path order. */
static void test_precedence(void)
{
	const weft_registry_shadowed *sh;
	weft_registry *reg = make();
	const char *file;
	const void *vt;
	size_t n;

	WT_OK(weft_registry_add_dir(reg, FX("shadow_a")));
	WT_OK(weft_registry_add_dir(reg, FX("shadow_b")));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "layered", &vt, &file));
	WT_CHECK(!strcmp(file, FX("shadow_a/fx_shadow.so")));
	sh = weft_registry_shadowed_files(reg, &n);
	WT_REQUIRE(n == 1);
	WT_CHECK(!strcmp(sh[0].file, FX("shadow_b/fx_shadow.so")));
	WT_CHECK(!strcmp(sh[0].by, FX("shadow_a/fx_shadow.so")));
	weft_registry_free(reg);

	reg = make();
	WT_OK(weft_registry_add_dir(reg, FX("shadow_b")));
	WT_OK(weft_registry_add_dir(reg, FX("shadow_a")));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "layered", &vt, &file));
	WT_CHECK(!strcmp(file, FX("shadow_b/fx_shadow.so")));
	weft_registry_free(reg);

	/* explicit files come before every directory */
	reg = make();
	WT_OK(weft_registry_add_dir(reg, FX("shadow_a")));
	WT_OK(weft_registry_add_file(reg, FX("shadow_b/fx_shadow.so")));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "layered", &vt, &file));
	WT_CHECK(!strcmp(file, FX("shadow_b/fx_shadow.so")));
	weft_registry_free(reg);
}

/* Directories added first (the config's), then WEFT_PLUGIN_PATH in its
 * order (missing and empty items skipped), then the build tree's dir. */
static void test_env_path(void)
{
	const char *build_dir = getenv("WEFT_PLUGIN_DIR");
	const char *const *dirs;
	weft_registry *reg;
	const char *file;
	const void *vt;
	struct stat sb;
	size_t n;

	WT_REQUIRE(setenv("WEFT_PLUGIN_PATH",
			  FX("shadow_b") ":" FX("does_not_exist") "::" FX("good") ":", 1) == 0);
	reg = make();
	WT_OK(weft_registry_add_dir(reg, FX("shadow_a")));
	WT_OK(weft_registry_add_default_paths(reg));
	dirs = weft_registry_dirs(reg, &n);
	WT_REQUIRE(n >= 3);
	WT_CHECK(!strcmp(dirs[0], FX("shadow_a")));
	WT_CHECK(!strcmp(dirs[1], FX("shadow_b")));
	WT_CHECK(!strcmp(dirs[2], FX("good")));
	/* ctest passes the build tree's plugin dir; it is searched next when
	 * it exists (it holds plugins once any are built) */
	if (build_dir && stat(build_dir, &sb) == 0) {
		WT_REQUIRE(n >= 4);
		WT_CHECK(!strcmp(dirs[3], build_dir));
	}
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "layered", &vt, &file));
	WT_CHECK(!strcmp(file, FX("shadow_a/fx_shadow.so")));
	weft_registry_free(reg);

	reg = make();
	WT_OK(weft_registry_add_default_paths(reg));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "layered", &vt, &file));
	WT_CHECK(!strcmp(file, FX("shadow_b/fx_shadow.so")));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "mirror", &vt, &file));
	WT_CHECK(!strcmp(file, FX("good/fx_good.so")));
	weft_registry_free(reg);
	unsetenv("WEFT_PLUGIN_PATH");

	reg = make();
	WT_FAILS(weft_registry_add_dir(reg, FX("does_not_exist")), WEFT_ERR_NOT_FOUND,
		 "plugin directory " FX("does_not_exist") " cannot be read",
		 "plugins.paths, WEFT_PLUGIN_PATH or --path");
	WT_FAILS(weft_registry_add_dir(reg, FX("good/fx_good.so")), WEFT_ERR_NOT_FOUND,
		 FX("good/fx_good.so") " is not a directory");
	weft_registry_free(reg);
}

static void test_newer_minor_accepted(void)
{
	weft_registry *reg = make();
	const weft_registry_entry *e;
	size_t n;

	WT_OK(weft_registry_add_dir(reg, FX("newer_minor")));
	WT_OK(weft_registry_list(reg, &e, &n));
	WT_REQUIRE(n == 1);
	WT_CHECK(!strcmp(e[0].name, "newer"));
	WT_CHECK(e[0].abi_version == WEFT_ABI_MAKE(WEFT_ABI_MAJOR, 99));
	weft_registry_free(reg);
}

/* A file name without a slash is the file in the current directory, not a
 * library looked up on the loader's path. */
static void test_relative_file(void)
{
	weft_registry *reg = make();
	char cwd[4096];
	const char *file;
	const void *vt;

	WT_REQUIRE(getcwd(cwd, sizeof(cwd)) != NULL);
	WT_REQUIRE(chdir(FX("good")) == 0);
	WT_OK(weft_registry_add_file(reg, "fx_extra.so"));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_OPTIM, "momentum", &vt, &file));
	WT_CHECK(!strcmp(file, "fx_extra.so"));
	WT_REQUIRE(chdir(cwd) == 0);
	weft_registry_free(reg);
}

static void test_min_struct_size(void)
{
	WT_CHECK(weft_plugin_min_struct_size(WEFT_PLUGIN_COMM) == WEFT_COMM_OPS_MIN_SIZE);
	WT_CHECK(weft_plugin_min_struct_size(WEFT_PLUGIN_OPTIM) == WEFT_OPTIM_OPS_MIN_SIZE);
	WT_CHECK(weft_plugin_min_struct_size(WEFT_PLUGIN_STRATEGY) == WEFT_STRATEGY_OPS_MIN_SIZE);
	WT_CHECK(weft_plugin_min_struct_size((weft_plugin_kind)0) == 0);
	/* the short fixture reports 8 bytes: below every kind's minimum */
	WT_CHECK(weft_plugin_min_struct_size(WEFT_PLUGIN_STRATEGY) > 8);
	/* and the short comm fixture's 24 bytes are below comm's minimum */
	WT_CHECK(weft_plugin_min_struct_size(WEFT_PLUGIN_COMM) > 24);
}

int main(void)
{
	test_good_dir();
	test_not_found();
	test_refusals();
	test_fatal_scan_repeats();
	test_scan_failures_recorded();
	test_duplicates();
	test_precedence();
	test_env_path();
	test_newer_minor_accepted();
	test_relative_file();
	test_min_struct_size();
	return wt_done("plugin_registry");
}
