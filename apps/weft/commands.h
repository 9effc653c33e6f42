/* The `weft` subcommands. Each lives in its own cmd_*.c and returns the
 * process exit status (0 success; 1 failure after one clear line on stderr;
 * 2 usage error). */
#ifndef WEFT_APP_COMMANDS_H
#define WEFT_APP_COMMANDS_H

typedef struct weft_command {
	const char *name;
	int (*run)(int argc, char **argv); /* argv[0] is the subcommand's name */
	const char *summary;
} weft_command;

int weft_cmd_version(int argc, char **argv);

/* `weft fit|validate|test --config FILE ...` (cmd_fit.c, core/train). */
int weft_cmd_fit(int argc, char **argv);
int weft_cmd_validate(int argc, char **argv);
int weft_cmd_test(int argc, char **argv);

/* `weft plugins [--path DIR]... [--config FILE]`: lists the plugins found
 * and the files that failed to load (cmd_plugins.c). */
int weft_cmd_plugins(int argc, char **argv);

/* `weft launch ... -- COMMAND` (cmd_launch.c, core/launch). */
int weft_cmd_launch(int argc, char **argv);

/* `weft bench comm ...` (cmd_bench.c). */
int weft_cmd_bench(int argc, char **argv);

/* `weft plan --config FILE [--world-size N]`: bytes per rank per memory
 * category and elements moved per step, before launch (cmd_plan.c,
 * core/plan). */
int weft_cmd_plan(int argc, char **argv);

/* `weft ckpt inspect|export|reshard DIR ...` (cmd_ckpt.c). */
int weft_cmd_ckpt(int argc, char **argv);

/* `weft tokenize --tokenizer FILE --out TRAIN.bin FILES...`: text ->
 * llm.c token files, encoded on several threads (cmd_tokenize.c,
 * core/text). */
int weft_cmd_tokenize(int argc, char **argv);

/* `weft generate --ckpt CHECKPOINT --prompt TEXT ...`: text from a
 * language model (cmd_generate.c, core/generate). */
int weft_cmd_generate(int argc, char **argv);

/* Prints "weft: <status>: <last error>" to stderr and returns 1. */
int weft_cli_fail(void);

#endif
