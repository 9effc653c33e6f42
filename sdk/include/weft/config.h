/* weft/config.h - the configuration tree.
 *
 * A YAML file becomes a tree of nodes; every node remembers file:line:col.
 * Reading is strict: each getter marks what it reads, and after setup
 * weft_config_check_unused() reports the first key that nobody read, with a
 * "did you mean" drawn from the keys that code asked for in the same
 * mapping. Plugins read their own sections through the same calls (via the
 * host services table, weft/plugin.h), so their options are checked too.
 *
 * Nodes are owned by their weft_config and are valid until
 * weft_config_free. Calls are not thread-safe on one config; read the
 * config during setup, from one thread.
 */
#ifndef WEFT_CONFIG_H
#define WEFT_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "weft/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_config weft_config; /* a whole document (opaque) */
typedef struct weft_cfg weft_cfg;       /* one node in it (opaque, borrowed) */

typedef enum weft_cfg_kind {
	WEFT_CFG_NULL = 0,   /* `~`, `null`, or nothing after the colon */
	WEFT_CFG_SCALAR = 1, /* a string, number or boolean, kept as text */
	WEFT_CFG_MAP = 2,
	WEFT_CFG_SEQ = 3
} weft_cfg_kind;

/* ---- documents ---------------------------------------------------- */

/* Parses a YAML file into a new config; free with weft_config_free.
 * Linear in the size of the file (large mappings are hashed).
 * Errors: WEFT_ERR_NOT_FOUND / WEFT_ERR_IO naming the path, WEFT_ERR_IO
 * also for a path that is no regular file (a FIFO, /dev/zero, a
 * directory: refused before reading, never blocking); WEFT_ERR_CONFIG for
 * a file over 16 MiB; WEFT_ERR_PARSE with "path:line:col: " and libyaml's
 * reason. An empty file gives an empty mapping. The root must be a
 * mapping. */
WEFT_API weft_status weft_config_load_file(const char *path, weft_config **out);

/* As weft_config_load_file, from memory; `name` stands for the file name
 * in messages ("<string>" when NULL). `text` need not be NUL-terminated;
 * over 16 MiB it is refused (WEFT_ERR_CONFIG). */
WEFT_API weft_status weft_config_load_string(const char *name, const char *text, size_t len,
					     weft_config **out);

/* Frees a config and all its nodes. NULL is ignored. */
WEFT_API void weft_config_free(weft_config *cfg);

/* The root mapping. Never NULL for a loaded config. */
WEFT_API const weft_cfg *weft_config_root(const weft_config *cfg);

/* Applies one command-line override the way LightningCLI does:
 * "trainer.devices=2" or "--trainer.devices=2". The value is parsed as
 * YAML (so `[1, 2]` and `{name: zero, stage: 2}` work); missing mappings on
 * the path are created; a scalar on the path is an error. Nodes made by an
 * override report their place as "<command line>:1:COL".
 * Errors: WEFT_ERR_CONFIG naming the argument and what is wrong. */
WEFT_API weft_status weft_config_override(weft_config *cfg, const char *arg);

/* Replaces (or creates) the node at dotted `path` with a parsed YAML
 * `value`; used by code that fills in defaults it resolved. The new nodes
 * count as read (code wrote them) and report "<default>:1:COL". */
WEFT_API weft_status weft_config_set(weft_config *cfg, const char *path, const char *value);

/* Replaces (or creates) the node at dotted `path` with a deep copy of
 * `src`, which may belong to another document (a DeepSpeed JSON read
 * beside the YAML). The copy keeps src's file:line:col for messages and
 * its keys count as unread, so the unknown-key check still reports a
 * misspelt one at its place in src's file. Errors: as weft_config_set. */
WEFT_API weft_status weft_config_graft(weft_config *cfg, const char *path, const weft_cfg *src);

/* After every reader ran: WEFT_OK if every key of every mapping was read,
 * else WEFT_ERR_CONFIG with the first unknown key in document order:
 *   "cfg.yaml:3:3: unknown key 'stratgy' in 'trainer' (did you mean 'strategy'?)"
 * The suggestion is the closest key (edit distance) that code asked for in
 * that mapping; without a close one the message lists the known keys. */
WEFT_API weft_status weft_config_check_unused(const weft_config *cfg);

/* Writes the whole config as YAML (block style, keys in document order,
 * comments dropped): the fully resolved config of `--print-config` and of
 * the run directory's config.yaml. Reading marks nothing as used. */
WEFT_API weft_status weft_config_write(const weft_config *cfg, FILE *out);

/* The same YAML as a new NUL-terminated string; free with free(). */
WEFT_API weft_status weft_config_to_string(const weft_config *cfg, char **out);

/* 64-bit FNV-1a hash of weft_config_to_string's text: ranks compare it to
 * prove they resolved the same config. */
WEFT_API uint64_t weft_config_hash(const weft_config *cfg);

/* ---- nodes --------------------------------------------------------- */

/* The node's kind; WEFT_CFG_NULL for a NULL node. */
WEFT_API weft_cfg_kind weft_cfg_kind_of(const weft_cfg *node);

/* Where the node was written: "file:line:col" (1-based) into buf, which is
 * returned. A NULL node gives "<unknown>". */
WEFT_API const char *weft_cfg_where(const weft_cfg *node, char *buf, size_t len);

/* The node's dotted path from the root ("trainer.strategy.stage",
 * "model.hidden.1") into buf, which is returned. */
WEFT_API const char *weft_cfg_path(const weft_cfg *node, char *buf, size_t len);

/* The value of `key` in mapping `map`, or NULL if absent (or if map is NULL
 * or not a mapping). Marks the key as read, and records that code asked for
 * it (a "did you mean" candidate) even when absent. */
WEFT_API const weft_cfg *weft_cfg_get(const weft_cfg *map, const char *key);

/* Number of entries of a mapping or sequence; 0 for other kinds. */
WEFT_API size_t weft_cfg_size(const weft_cfg *node);

/* The i-th item of a sequence, or the i-th value of a mapping (marking its
 * key as read); NULL when out of range. */
WEFT_API const weft_cfg *weft_cfg_at(const weft_cfg *node, size_t i);

/* The i-th key of a mapping; NULL when out of range or not a mapping. */
WEFT_API const char *weft_cfg_key_at(const weft_cfg *map, size_t i);

/* The text of a scalar; NULL for other kinds. */
WEFT_API const char *weft_cfg_scalar(const weft_cfg *node);

/* Marks a node and everything under it as read. */
WEFT_API void weft_cfg_mark_used(const weft_cfg *node);

/* Typed conversion of one node. WEFT_ERR_CONFIG when the node is not of
 * the type, with "file:line:col: 'path' must be an integer, got 'two'".
 * Integers accept decimal, hex (0x..) and underscores; floats accept YAML
 * forms (1e-3, 1.0e-3, .inf); booleans true/false/yes/no/on/off. */
WEFT_API weft_status weft_cfg_as_int(const weft_cfg *node, int64_t *out);
WEFT_API weft_status weft_cfg_as_float(const weft_cfg *node, double *out);
WEFT_API weft_status weft_cfg_as_bool(const weft_cfg *node, int *out);
WEFT_API weft_status weft_cfg_as_str(const weft_cfg *node, const char **out);

/* Getters of `key` in `map` with a default used when the key is absent or
 * null (or `map` is NULL or null). The same errors as the conversions
 * above, and WEFT_ERR_CONFIG when `map` is present but not a mapping. */
WEFT_API weft_status weft_cfg_int(const weft_cfg *map, const char *key, int64_t def, int64_t *out);
WEFT_API weft_status weft_cfg_float(const weft_cfg *map, const char *key, double def, double *out);
WEFT_API weft_status weft_cfg_bool(const weft_cfg *map, const char *key, int def, int *out);
WEFT_API weft_status weft_cfg_str(const weft_cfg *map, const char *key, const char *def,
				  const char **out);

/* A string that must be one of `choices` (NULL-terminated); *out is its
 * index. Otherwise WEFT_ERR_CONFIG listing the choices, with a did-you-mean.
 * A NULL `def` makes the key required; a `def` not among the choices is
 * WEFT_ERR_INVALID_ARG. */
WEFT_API weft_status weft_cfg_choice(const weft_cfg *map, const char *key,
				     const char *const *choices, const char *def, int *out);

/* Sets WEFT_ERR_CONFIG with "file:line:col: 'path' " before the formatted
 * message (for range checks a reader makes itself) and returns it:
 *   return weft_cfg_error(lr, "must be >= 0, got %g", v);              */
WEFT_API weft_status weft_cfg_error(const weft_cfg *node, const char *fmt, ...) WEFT_PRINTF(2, 3);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_CONFIG_H */
