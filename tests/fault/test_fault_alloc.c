/* Allocation fault injection, as SQLite does it: for N = 1, 2, ... the
 * Nth allocation after the operation starts fails (NULL, errno ENOMEM)
 * and the operation must end in one clear error ("out of memory ..."),
 * never crash or abort, leak nothing, and leave nothing half-written; the
 * loop ends at the first N the operation never reaches.
 *
 * The operations, each through the core's own functions:
 *   config     weft_config_load_file of tests/fault/tiny.yaml (libyaml
 *              included: it is linked statically here, so its
 *              allocations fail too)
 *   config_check  the same config checked whole, as weft fit does before
 *              a run: the model built on the CPU, the data opened, the
 *              plugins it names loaded, every key checked
 *   ckpt_save  a checkpoint written as the trainer writes one (atomic
 *              directory, safetensors file adopted, trainer_state.json,
 *              manifest, commit): after a failure no directory exists
 *              under the final name, nor a .tmp-<pid> one
 *   ckpt_load  the checkpoint verified against its manifest, its
 *              safetensors opened, its trainer_state.json parsed
 *   plugins    a registry: the build's plugin folder scanned, the adamw
 *              optimizer found (the registry's public functions only)
 *
 * Allocations are counted by wrapping malloc, calloc, realloc, strdup,
 * strndup, posix_memalign and asprintf at link time (-Wl,--wrap, see
 * CMakeLists.txt): every reference in this executable, the static core
 * libraries and libyaml.a, goes through the __wrap_ functions below. This
 * coexists with AddressSanitizer (the __real_ functions are its
 * interceptors). Code in shared objects (libc's own, dlopen()ed plugins)
 * is not counted.
 *
 * Leaks: under the sanitizer build LeakSanitizer is asked after every N
 * (__lsan_do_recoverable_leak_check), so a leak names the operation and N.
 *
 * A failure an operation can do without (a "did you mean" note, a shrinking
 * realloc) may let it succeed; that is counted, not an error.
 *
 * Time: each operation's every N is run up to 3000 allocations, then every
 * 7th (the counts at the time of writing: config 356, config_check 541,
 * ckpt_save 8, ckpt_load 101, plugins 31, so every N runs); the whole
 * driver takes about 5 s in release and 50 s under ASan (the leak check
 * after each N is most of it). */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "weft/config.h"
#include "weft/status.h"
#include "base/json.h"
#include "nn/safetensors.h"
#include "plugin/registry.h"
#include "runlog/atomic_dir.h"
#include "runlog/rundir.h"
#include "train/trainer.h"
#include "weft_test.h"

#if defined(__SANITIZE_ADDRESS__)
#define FAULT_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FAULT_LSAN 1
#endif
#endif
#ifdef FAULT_LSAN
int __lsan_do_recoverable_leak_check(void);
#endif

/* ---- the counting allocator ---------------------------------------- */

static atomic_long seen;     /* allocations since armed */
static atomic_long fail_at;  /* the one to fail (1-based); 0: none */
static atomic_int armed, hit;

static int should_fail(void)
{
	long n;

	if (!atomic_load(&armed))
		return 0;
	n = atomic_fetch_add(&seen, 1) + 1;
	if (n == atomic_load(&fail_at)) {
		atomic_store(&hit, 1);
		errno = ENOMEM;
		return 1;
	}
	return 0;
}

#include "fault_wrap.h"

static void arm(long n)
{
	atomic_store(&seen, 0);
	atomic_store(&hit, 0);
	atomic_store(&fail_at, n);
	atomic_store(&armed, 1);
}

static void disarm(void)
{
	atomic_store(&armed, 0);
}

/* ---- the operations ------------------------------------------------- */

static char work[512], config_path[512], plugin_dir[512], ckpt_final[600];

static weft_status op_config(void)
{
	weft_config *cfg = NULL;
	weft_status st = weft_config_load_file(config_path, &cfg);

	weft_config_free(cfg);
	return st;
}

/* The whole config read as `weft fit` reads it before running: model
 * built on the CPU, data opened, plugins loaded, every key checked. */
static weft_status op_config_check(void)
{
	weft_run_opts opts = { .mode = WEFT_RUN_FIT, .config_path = config_path };
	weft_config *cfg = NULL;
	weft_status st = weft_config_load_file(config_path, &cfg);

	if (!st)
		st = weft_trainer_check_config(cfg, &opts, 1);
	weft_config_free(cfg);
	return st;
}

static const char state_json[] =
	"{\"format\": \"weft-trainer-state\", \"version\": 1, \"global_step\": 3, "
	"\"epoch\": 0, \"next_batch\": 3, \"optimizer\": \"adamw\", "
	"\"optimizer_slots\": [\"m\", \"v\"], \"numel\": 6, \"train_loss\": 1.5}";

/* What the trainer's save does on rank 0 (core/train/checkpoint.c). */
static weft_status save_into(const char *final)
{
	static const float w[6] = { 1, 2, 3, 4, 5, 6 }, b[2] = { 7, 8 };
	static const int64_t w_shape[2] = { 2, 3 }, b_shape[1] = { 2 };
	const weft_st_entry entries[2] = {
		{ .name = "fc.weight", .dtype = WEFT_F32, .ndim = 2, .shape = w_shape, .data = w },
		{ .name = "fc.bias", .dtype = WEFT_F32, .ndim = 1, .shape = b_shape, .data = b },
	};
	weft_atomic_dir *d = NULL;
	char path[700];
	weft_status st;

	st = weft_atomic_dir_begin(final, &d);
	if (st)
		return st;
	snprintf(path, sizeof(path), "%s/model.safetensors", weft_atomic_dir_tmp_path(d));
	st = weft_st_write(path, entries, 2);
	if (!st)
		st = weft_atomic_dir_adopt_file(d, "model.safetensors");
	if (!st)
		st = weft_atomic_dir_write_file(d, "trainer_state.json", state_json,
						strlen(state_json));
	if (st) {
		weft_atomic_dir_abort(d);
		return st;
	}
	return weft_atomic_dir_commit(d);
}

static weft_status op_ckpt_save(void)
{
	return save_into(ckpt_final);
}

/* What the trainer's load reads (weft_trainer_load_checkpoint). */
static weft_status op_ckpt_load(void)
{
	static const char *const needed[] = { "model.safetensors", "trainer_state.json" };
	weft_st_file *f = NULL;
	weft_json_value *js = NULL;
	char path[700];
	weft_status st;

	st = weft_manifest_verify_listed(ckpt_final, needed, 2);
	if (st)
		return st;
	snprintf(path, sizeof(path), "%s/model.safetensors", ckpt_final);
	st = weft_st_open(path, &f);
	if (st)
		return st;
	if (f->count != 2 || !weft_st_find(f, "fc.weight"))
		st = weft_error_set(WEFT_ERR_INTERNAL, "test: the checkpoint read back wrong");
	weft_st_close(f);
	if (st)
		return st;
	snprintf(path, sizeof(path), "%s/trainer_state.json", ckpt_final);
	st = weft_json_parse_file(path, &js);
	weft_json_free(js);
	return st;
}

static weft_status op_plugins(void)
{
	weft_registry *reg = NULL;
	const void *vt = NULL;
	weft_status st = weft_registry_create(&reg);

	if (st)
		return st;
	st = weft_registry_add_dir(reg, plugin_dir);
	if (!st)
		st = weft_registry_scan(reg);
	if (!st)
		st = weft_registry_find(reg, WEFT_PLUGIN_OPTIM, "adamw", &vt, NULL);
	weft_registry_free(reg);
	return st;
}

/* ---- the driver ----------------------------------------------------- */

/* Names in `dir` starting with `prefix`, counted. */
static int count_named(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

static int is_memory_error(const char *msg)
{
	return strstr(msg, "out of memory") != NULL;
}

typedef struct fault_op {
	const char *name;
	weft_status (*run)(void);
	int writes_ckpt; /* check that a failed save leaves nothing */
} fault_op;

#define EVERY_UP_TO 3000
#define STRIDE 7
#define MAX_N 200000

static void drive(const fault_op *op)
{
	long n, runs = 0, failed = 0, tolerated = 0;
	weft_status st;

	for (n = 1; n < MAX_N; n += n < EVERY_UP_TO ? 1 : STRIDE) {
		char msg[1024];

		if (op->writes_ckpt)
			WT_REQUIRE(weft_atomic_dir_remove(ckpt_final) == WEFT_OK);
		weft_error_clear();
		arm(n);
		st = op->run();
		disarm();
		runs++;
		snprintf(msg, sizeof(msg), "%s", st ? weft_error_last() : "");
		if (!atomic_load(&hit)) {
			if (st)
				fprintf(stderr, "%s: fails without a fault: %s\n", op->name, msg);
			WT_CHECK(st == WEFT_OK);
			break; /* the operation needs fewer than n allocations */
		}
		if (st) {
			failed++;
			if (!is_memory_error(msg) || strchr(msg, '\n')) {
				wt_failures++;
				fprintf(stderr, "%s: allocation %ld failed, the error is not one "
					"'out of memory' line: %s\n", op->name, n, msg);
			}
			if (op->writes_ckpt) {
				struct stat sb;
				const char *slash = strrchr(ckpt_final, '/');
				char base[64];

				snprintf(base, sizeof(base), "%s.tmp-", slash + 1);
				if (stat(ckpt_final, &sb) == 0) {
					wt_failures++;
					fprintf(stderr, "%s: allocation %ld failed, yet '%s' exists\n",
						op->name, n, ckpt_final);
				}
				if (count_named(work, base)) {
					wt_failures++;
					fprintf(stderr, "%s: allocation %ld failed and left a "
						"temporary directory\n", op->name, n);
				}
			}
		} else {
			tolerated++; /* a failure the operation could do without */
		}
#ifdef FAULT_LSAN
		if (__lsan_do_recoverable_leak_check()) {
			wt_failures++;
			fprintf(stderr, "%s: leak after allocation %ld failed (%s)\n", op->name,
				n, msg[0] ? msg : "the operation succeeded");
		}
#endif
		wt_checks++;
	}
	WT_CHECK(n < MAX_N);
	fprintf(stderr, "%s: %ld allocations; %ld runs, %ld ended in an error, %ld succeeded "
		"anyway\n", op->name, n - 1, runs, failed, tolerated);
}

int main(void)
{
	const char *src = getenv("WEFT_SOURCE_DIR"), *pd = getenv("WEFT_PLUGIN_DIR");
	const fault_op ops[] = {
		{ "config", op_config, 0 },
		{ "config_check", op_config_check, 0 },
		{ "ckpt_save", op_ckpt_save, 1 },
		{ "ckpt_load", op_ckpt_load, 0 },
		{ "plugins", op_plugins, 0 },
	};
	char cmd[600];

	WT_REQUIRE(src && pd);
	snprintf(config_path, sizeof(config_path), "%s/tests/fault/tiny.yaml", src);
	snprintf(plugin_dir, sizeof(plugin_dir), "%s", pd);
	snprintf(work, sizeof(work), "%s/fault_alloc_%d", getenv("TMPDIR") ? getenv("TMPDIR") :
		 "/tmp", (int)getpid());
	WT_REQUIRE(weft_mkdirs(work) == WEFT_OK);
	snprintf(ckpt_final, sizeof(ckpt_final), "%s/epoch=0-step=3", work);

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		/* the load needs a checkpoint; the others start from none */
		if (ops[i].run == op_ckpt_load)
			WT_OK(save_into(ckpt_final));
		drive(&ops[i]);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
	WT_CHECK(system(cmd) == 0);
	return wt_done("test_fault_alloc");
}
