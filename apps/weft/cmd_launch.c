/* `weft launch`: start ranks on this node like torchrun (core/launch). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "launch/launch.h"
#include "weft/weft.h"

static void launch_usage(FILE *out)
{
	fprintf(out,
		"usage: weft launch --nproc-per-node N [--nnodes M --node-rank R\n"
		"                   --master-addr A --master-port P] [--max-restarts K]\n"
		"                   [--join-timeout S]\n"
		"                   -- COMMAND [ARGS...]\n\n"
		"Starts N copies of COMMAND with torchrun's variables (RANK, WORLD_SIZE,\n"
		"LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and weft's, serves\n"
		"the rendezvous store on node 0, stops every rank when one fails and names\n"
		"it, restarts the group up to K times, and forwards SIGINT/SIGTERM.\n"
		"With several nodes, the launchers wait up to S seconds (1800) for each\n"
		"other and for the store, and refuse a --node-rank given twice.\n");
}

/* "--flag V" or "--flag=V" (underscores accepted as torchrun does). */
static int flag_value(int argc, char **argv, int *i, const char *flag, const char **val)
{
	char alt[64];
	const char *a = argv[*i];
	size_t n = strlen(flag);

	snprintf(alt, sizeof(alt), "%s", flag);
	for (char *p = alt + 2; *p; p++)
		if (*p == '-')
			*p = '_';
	if (strncmp(a, flag, n) && strncmp(a, alt, n))
		return 0;
	if (a[n] == '=') {
		*val = a + n + 1;
		return 1;
	}
	if (a[n] == '\0' && *i + 1 < argc) {
		*val = argv[++*i];
		return 1;
	}
	return 0;
}

static int parse_int(const char *flag, const char *v, int *out)
{
	char *end;
	long n = strtol(v, &end, 10);

	if (end == v || *end || n < 0 || n > 1000000) {
		weft_error_set(WEFT_ERR_CONFIG, "%s '%s' is not a number", flag, v);
		return -1;
	}
	*out = (int)n;
	return 0;
}

int weft_cmd_launch(int argc, char **argv)
{
	weft_launch_opts o = { .nproc_per_node = 1, .nnodes = 1 };
	weft_launch_result res;
	int i;

	for (i = 1; i < argc; i++) {
		const char *v;

		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		}
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			launch_usage(stdout);
			return 0;
		}
		if (flag_value(argc, argv, &i, "--nproc-per-node", &v)) {
			if (parse_int("--nproc-per-node", v, &o.nproc_per_node))
				return weft_cli_fail();
		} else if (flag_value(argc, argv, &i, "--nnodes", &v)) {
			if (parse_int("--nnodes", v, &o.nnodes))
				return weft_cli_fail();
		} else if (flag_value(argc, argv, &i, "--node-rank", &v)) {
			if (parse_int("--node-rank", v, &o.node_rank))
				return weft_cli_fail();
		} else if (flag_value(argc, argv, &i, "--master-port", &v)) {
			if (parse_int("--master-port", v, &o.master_port))
				return weft_cli_fail();
		} else if (flag_value(argc, argv, &i, "--max-restarts", &v)) {
			if (parse_int("--max-restarts", v, &o.max_restarts))
				return weft_cli_fail();
		} else if (flag_value(argc, argv, &i, "--join-timeout", &v)) {
			int sec;

			if (parse_int("--join-timeout", v, &sec))
				return weft_cli_fail();
			o.join_timeout_ms = (int64_t)sec * 1000;
		} else if (flag_value(argc, argv, &i, "--master-addr", &v)) {
			o.master_addr = v;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "weft launch: unknown option '%s'\n", argv[i]);
			launch_usage(stderr);
			return 2;
		} else {
			break; /* the command starts here (the '--' is optional) */
		}
	}
	o.argv = i < argc ? argv + i : NULL;
	if (weft_launch_run(&o, &res))
		return weft_cli_fail();
	if (res.exit_code) {
		fprintf(stderr, "weft: launch failed: %s%s\n", res.cause,
			res.restarts ? " (after restarts)" : "");
		return res.exit_code;
	}
	return 0;
}
