/* Kernel libraries are found by the plugin layer's one search path: a
 * libweft copied elsewhere (an installed prefix that was moved) loads the
 * weft_kernels_cuda.so in weft/plugins beside itself, not the one in the
 * build tree it was built in; WEFT_PLUGIN_PATH comes first; a missing,
 * refusing or unloadable library gives one error naming the device, the
 * file and the reason, and the advice to use the CPU.
 *
 * Lays out PREFIX/bin/kernels_probe and PREFIX/lib/libweft.so.N (the probe
 * finds libweft through its $ORIGIN/../lib run path, as the installed weft
 * does) with fixture kernel libraries (fixtures/kernels.c), and reads what
 * the probe prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "weft_test.h"

static char prefix[] = "/tmp/weft_kernels_relocated_XXXXXX";
static char out_buf[1 << 14];
static const char *out = out_buf; /* a pointer, for WT_STR_CONTAINS */

/* Runs a shell command; 1 when it exited 0. */
static int sh(const char *fmt, const char *a, const char *b)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd), fmt, a, b);
	return system(cmd) == 0;
}

/* Runs the copied probe with WEFT_PLUGIN_PATH set to `path` (NULL: unset)
 * into out[]; returns its exit status. */
static int probe(const char *path)
{
	char cmd[4096];
	size_t len = 0, k;
	FILE *p;
	int status;

	if (path)
		snprintf(cmd, sizeof(cmd), "env WEFT_PLUGIN_PATH=%s %s/bin/kernels_probe 2>&1", path,
			 prefix);
	else
		snprintf(cmd, sizeof(cmd), "env -u WEFT_PLUGIN_PATH %s/bin/kernels_probe 2>&1",
			 prefix);
	p = popen(cmd, "r");
	WT_REQUIRE(p != NULL);
	while ((k = fread(out_buf + len, 1, sizeof(out_buf) - 1 - len, p)) > 0)
		len += k;
	out_buf[len] = '\0';
	status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Puts `so` (a path, or NULL for none) at PREFIX/lib/weft/plugins. */
static void install_kernels(const char *so)
{
	WT_REQUIRE(sh("rm -f %s/lib/weft/plugins/weft_kernels_cuda.so%s", prefix, ""));
	if (so)
		WT_REQUIRE(sh("cp %s %s/lib/weft/plugins/weft_kernels_cuda.so", so, prefix));
}

static void show_on_failure(int before)
{
	if (wt_failures > before)
		fprintf(stderr, "probe output was:\n%s", out);
}

int main(void)
{
	char want[4096], other[4200];
	int before;

	WT_REQUIRE(mkdtemp(prefix) != NULL);
	WT_REQUIRE(sh("mkdir -p %s/bin %s/lib/weft/plugins", prefix, prefix));
	WT_REQUIRE(sh("cp " PROBE " %s/bin/kernels_probe%s", prefix, ""));
	WT_REQUIRE(sh("cp " LIBWEFT " %s/lib/" LIBWEFT_SONAME "%s", prefix, ""));
	snprintf(want, sizeof(want), "%s/lib/weft/plugins/weft_kernels_cuda.so", prefix);

	/* beside the copied libweft, with the build tree still in place */
	before = wt_failures;
	install_kernels(FX_KERNELS);
	WT_CHECK(probe(NULL) == 0);
	snprintf(other, sizeof(other), "libweft %s/bin/../lib/" LIBWEFT_SONAME "\n", prefix);
	WT_STR_CONTAINS(out, other);
	snprintf(other, sizeof(other), "loaded %s (fx-cuda)", want);
	WT_STR_CONTAINS(out, other);
	show_on_failure(before);

	/* WEFT_PLUGIN_PATH first: the refusing copy beside libweft is not
	 * reached when the path holds a library that loads */
	before = wt_failures;
	install_kernels(FX_REFUSING);
	WT_CHECK(probe(FX_KERNELS_DIR) == 0);
	WT_STR_CONTAINS(out, "loaded " FX_KERNELS_DIR "/weft_kernels_cuda.so (fx-cuda)");
	show_on_failure(before);

	/* the entry refuses: its reason, with the file */
	before = wt_failures;
	WT_CHECK(probe(NULL) == 0);
	snprintf(other, sizeof(other), "error no kernels for device cuda:0: %s: the fixture "
		 "refuses: no device here; use accelerator: cpu", want);
	WT_STR_CONTAINS(out, other);
	show_on_failure(before);

	/* not a shared object: dlopen's reason, naming the file */
	before = wt_failures;
	WT_REQUIRE(sh("echo 'not a library' > %s%s", want, ""));
	WT_CHECK(probe(NULL) == 0);
	snprintf(other, sizeof(other), "error no kernels for device cuda:0: %s: ", want);
	WT_STR_CONTAINS(out, other);
	WT_STR_CONTAINS(out, "use accelerator: cpu");
	show_on_failure(before);

	/* missing beside the copied libweft: the build tree's directory is
	 * another weft's and is not searched */
	before = wt_failures;
	install_kernels(NULL);
	WT_CHECK(probe(NULL) == 0);
	WT_STR_CONTAINS(out, "error no kernels for device cuda:0: weft_kernels_cuda.so was not "
			     "found (this build has no CUDA kernels, or WEFT_PLUGIN_PATH does "
			     "not name their directory); use accelerator: cpu");
	show_on_failure(before);

	sh("rm -rf %s%s", prefix, "");
	return wt_done("test_kernels_relocated");
}
