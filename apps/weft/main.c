/* weft: the command line. `weft <command> [options]`. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "plugin/registry.h"
#include "weft/weft.h"

#ifndef WEFT_INSTALL_LIBDIR
#define WEFT_INSTALL_LIBDIR "lib"
#endif

static const weft_command commands[] = {
	{ "fit", weft_cmd_fit, "train a model from a YAML config" },
	{ "validate", weft_cmd_validate, "evaluate a checkpoint on the validation data" },
	{ "test", weft_cmd_test, "evaluate a checkpoint on the test data" },
	{ "version", weft_cmd_version, "print weft's version and plugin ABI" },
	{ "plugins", weft_cmd_plugins, "list the plugins found and files that failed to load" },
	{ "launch", weft_cmd_launch, "start ranks on this node like torchrun, restart on failure" },
	{ "bench", weft_cmd_bench, "benchmarks: `weft bench comm` prints the nccl-tests table" },
	{ "plan", weft_cmd_plan, "bytes per rank and communication per step, before launch" },
	{ "ckpt", weft_cmd_ckpt, "inspect a checkpoint, export its weights, reshard it" },
	{ "tokenize", weft_cmd_tokenize, "text files -> llm.c token files with a BPE tokenizer.json" },
	{ "generate", weft_cmd_generate, "sample text from a trained language model" },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

int weft_cli_fail(void)
{
	fprintf(stderr, "weft: %s: %s\n", weft_status_str(weft_error_last_status()),
		weft_error_last());
	return 1;
}

int weft_cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("weft %s (plugin ABI %u.%u)\n", weft_version(), WEFT_ABI_MAJOR, WEFT_ABI_MINOR);
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: weft <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n`weft <command> --help` describes each command.\n");
}

/* This program has the core built in (libweft.so exports the SDK alone, so
 * it links the core's libraries), so "the plugins beside libweft" are
 * PREFIX/LIBDIR/weft/plugins beside the PREFIX/bin it runs from: an
 * installed weft finds its own plugins wherever the prefix was moved, the
 * build tree's build/lib/weft/plugins. Nothing is set when that directory
 * does not exist (the search falls back to the build and install ones). */
static void set_plugin_home(void)
{
	char exe[PATH_MAX], dir[PATH_MAX + 64], *slash, *real;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0 || (size_t)n >= sizeof(exe) - 1)
		return;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return;
	*slash = '\0';
	snprintf(dir, sizeof(dir), "%s/../%s/weft/plugins", exe, WEFT_INSTALL_LIBDIR);
	real = realpath(dir, NULL);
	if (real)
		weft_registry_set_program_dir(real);
	free(real);
}

int main(int argc, char **argv)
{
	set_plugin_home();
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version"))
		return weft_cmd_version(argc - 1, argv + 1);
	for (size_t i = 0; i < NCOMMANDS; i++) {
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "weft: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
