/* `weft plugins`: the table of what was found, the failures after it, the
 * exit status, and the one-line error when nothing could be listed. Runs
 * the built CLI ($WEFT_BUILD_DIR/bin/weft) on the fixture directories. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "weft/plugin.h"
#include "weft/status.h"
#include "weft_test.h"

/* this weft's ABI as `weft plugins` prints it, e.g. "1.6" */
#define ABI_STR2(x) #x
#define ABI_STR1(a, b) ABI_STR2(a) "." ABI_STR2(b)
#define ABI_STR ABI_STR1(WEFT_ABI_MAJOR, WEFT_ABI_MINOR)

#define FX(rel) FX_DIR "/" rel

static char out_buf[1 << 16];
static const char *out = out_buf; /* a pointer, for WT_STR_CONTAINS */

/* Runs `weft ARGS 2>&1` into out[]; returns the exit status. */
static int run(const char *args)
{
	const char *build = getenv("WEFT_BUILD_DIR");
	char cmd[2048];
	size_t len = 0, k;
	FILE *p;
	int status;

	WT_REQUIRE(build != NULL);
	/* a WEFT_PLUGIN_PATH in the caller's environment would add dirs */
	snprintf(cmd, sizeof(cmd), "env -u WEFT_PLUGIN_PATH %s/bin/weft %s 2>&1", build, args);
	p = popen(cmd, "r");
	WT_REQUIRE(p != NULL);
	while ((k = fread(out_buf + len, 1, sizeof(out_buf) - 1 - len, p)) > 0)
		len += k;
	out_buf[len] = '\0';
	status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Whether out[] has a table line with exactly these four columns. */
static int has_row(const char *kind, const char *name, const char *abi, const char *file)
{
	char line[1024], k[64], n[64], a[64], f[512], extra[8];
	const char *s = out;

	while (*s) {
		size_t l = strcspn(s, "\n");

		snprintf(line, sizeof(line), "%.*s", (int)l, s);
		if (sscanf(line, "%63s %63s %63s %511s %7s", k, n, a, f, extra) == 4 &&
		    !strcmp(k, kind) && !strcmp(n, name) && !strcmp(a, abi) && !strcmp(f, file))
			return 1;
		s += l + (s[l] == '\n');
	}
	return 0;
}

static void test_table(void)
{
	int rc = run("plugins --path " FX("good") " --path=" FX("unloadable") " --path "
		     FX("newer_minor"));

	WT_CHECK(rc == 0);
	WT_STR_CONTAINS(out, "KIND");
	WT_CHECK(has_row("comm", "loopback", ABI_STR, FX("good/fx_good.so")));
	WT_CHECK(has_row("strategy", "mirror", ABI_STR, FX("good/fx_good.so")));
	WT_CHECK(has_row("strategy", "shard", ABI_STR, FX("good/fx_good.so")));
	WT_CHECK(has_row("strategy", "newer", "1.99", FX("newer_minor/fx_newer.so")));
	WT_CHECK(has_row("optim", "momentum", ABI_STR, FX("good/fx_extra.so")));
	WT_CHECK(has_row("optim", "plainsgd", ABI_STR, FX("good/fx_good.so")));
	WT_STR_CONTAINS(out, "searched: " FX("good") ", " FX("unloadable") ", " FX("newer_minor"));
	WT_STR_CONTAINS(out, "1 file failed to load:\n  " FX("unloadable/fx_undef.so") "\n    ");
	WT_STR_CONTAINS(out, "undefined symbol: weft_fixture_symbol_nobody_defines");
	if (wt_failures)
		fprintf(stderr, "output was:\n%s", out);
}

static void test_shadowed_and_config(void)
{
	char dir[] = "plugin_cli_XXXXXX", path[64], args[512];
	FILE *f;
	int rc;

	WT_REQUIRE(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/cfg.yaml", dir);
	f = fopen(path, "w");
	WT_REQUIRE(f != NULL);
	fprintf(f, "plugins:\n  paths: [%s]\n", FX("shadow_b"));
	fclose(f);
	snprintf(args, sizeof(args), "plugins --path %s --config %s", FX("shadow_a"), path);
	rc = run(args);
	WT_CHECK(rc == 0);
	WT_CHECK(has_row("strategy", "layered", ABI_STR, FX("shadow_a/fx_shadow.so")));
	WT_STR_CONTAINS(out, "1 file shadowed by an earlier file of the same name:\n  "
		       FX("shadow_b/fx_shadow.so") " (by " FX("shadow_a/fx_shadow.so") ")");
	unlink(path);
	rmdir(dir);
}

static void test_errors(void)
{
	WT_CHECK(run("plugins --path " FX("dup")) == 1);
	WT_STR_CONTAINS(out, "weft: plugin error: two files provide the strategy plugin 'twin': "
		       FX("dup/fx_dup_a.so") " and " FX("dup/fx_dup_b.so"));
	WT_CHECK(run("plugins --path " FX("missing_dir")) == 1);
	WT_STR_CONTAINS(out, "weft: not found: plugin directory " FX("missing_dir")
		       " cannot be read");
	WT_CHECK(run("plugins --bogus") == 2);
	WT_STR_CONTAINS(out, "unknown option '--bogus'");
	WT_STR_CONTAINS(out, "usage: weft plugins");
	WT_CHECK(run("plugins --path") == 2);
	WT_STR_CONTAINS(out, "--path needs a value");
	WT_CHECK(run("plugins --help") == 0);
	WT_STR_CONTAINS(out, "WEFT_PLUGIN_PATH");
}

int main(void)
{
	test_table();
	test_shadowed_and_config();
	test_errors();
	return wt_done("plugin_cli");
}
