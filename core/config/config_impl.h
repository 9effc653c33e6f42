/* config_impl.h - internals shared by the files of core/config.
 *
 * A document is a tree of weft_cfg nodes. A mapping's entries are its
 * children: each child carries its own key (and where the key was written),
 * so a node knows its parent and its key and can print its dotted path.
 * Sequence items carry their index instead.
 *
 * Nodes are never freed before the document: a node replaced by an
 * override or by weft_config_set moves to the document's graveyard, so
 * pointers readers already hold stay valid until weft_config_free.
 */
#ifndef WEFT_CONFIG_IMPL_H
#define WEFT_CONFIG_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "weft/config.h"

/* Deepest nesting of mappings and sequences a document may have. */
#define WEFT_CFG_MAX_DEPTH 256
/* Most nodes that anchors/aliases and merge keys may copy in one parse:
 * bounds "billion laughs" documents to a few megabytes. */
#define WEFT_CFG_MAX_COPIED 100000
/* Largest config text (a file or a string) parsed: a parsed node costs
 * about 30 times its text, so this bounds a config's memory to a few
 * hundred megabytes; hand-written configs are kilobytes. */
#define WEFT_CFG_MAX_BYTES (16 << 20)

/* A hash index over a list of keys (a mapping's kids, the keys asked of
 * it): open addressing, each slot 0 (empty) or a key's index + 1, kept at
 * most half full; all zero (no slots) while the list is short. */
struct cfg_index {
	size_t *slots;
	size_t n_slots; /* a power of two, or 0 */
};

/* The key at `i` of the list `owner` indexes. */
typedef const char *(*cfg_key_at_fn)(const void *owner, size_t i);

/* Lists up to this many keys are scanned; longer ones indexed. */
#define CFG_INDEX_MIN 16

/* Makes room for key number `n` (0-based; keys 0..n-1 are already in the
 * list), building or growing the index from the list as needed.
 * WEFT_ERR_NOMEM (message set) on failure, the index unchanged. */
weft_status cfg_index_reserve(struct cfg_index *ix, size_t n, cfg_key_at_fn key_at,
			      const void *owner);

/* Records that key `i` of the list is `key`; needs room reserved. */
void cfg_index_put(struct cfg_index *ix, const char *key, size_t i);

/* The position + 1 of `key` in the list, or 0 (the index must be built). */
size_t cfg_index_find(const struct cfg_index *ix, const char *key, cfg_key_at_fn key_at,
		      const void *owner);

struct weft_cfg {
	weft_cfg_kind kind;
	uint8_t used;   /* this mapping entry's key was read */
	uint32_t line, col;         /* where the value was written (1-based) */
	uint32_t key_line, key_col; /* where its key was written (entries) */
	const char *file;     /* interned in the document */
	const char *key_file; /* interned in the document */
	char *key;            /* key in the parent mapping, or NULL */
	size_t index;         /* index in the parent sequence */
	struct weft_cfg *parent;
	char *text; /* scalar text (NUL-free), NULL for other kinds */
	struct weft_cfg **kids;
	size_t n, cap;
	struct cfg_index kid_index; /* a large mapping's kids by key */
	char **asked; /* keys readers asked this mapping for */
	size_t n_asked, cap_asked;
	struct cfg_index asked_index;
};

struct weft_config {
	weft_cfg *root;
	char **names; /* interned file names */
	size_t n_names;
	weft_cfg **grave; /* detached subtrees, freed with the document */
	size_t n_grave, cap_grave;
};

/* ---- node.c --------------------------------------------------------- */

/* A new node of `kind` at file:line:col (text copied for scalars; text may
 * be NULL for containers). NULL when out of memory. */
weft_cfg *cfg_node_new(weft_cfg_kind kind, const char *file, uint32_t line, uint32_t col,
		       const char *text, size_t len);

/* Frees a node, its key, its text and every node under it. */
void cfg_node_free(weft_cfg *node);

/* Appends `kid` to container `parent` (setting parent and index); a
 * mapping's kid must carry its key already, and keeps it. Amortised O(1).
 * WEFT_ERR_NOMEM on failure, kid untouched. */
weft_status cfg_node_append(weft_cfg *parent, weft_cfg *kid);

/* The entry of mapping `map` with `key`, or NULL. Marks nothing.
 * O(1) on average (a hash index for large mappings). */
weft_cfg *cfg_map_find(const weft_cfg *map, const char *key);

/* A deep copy of `src` (positions kept, read-marks cleared), counting
 * the nodes it makes into *budget and failing with WEFT_ERR_CONFIG when
 * the count passes WEFT_CFG_MAX_COPIED. NULL on error (status in *st). */
weft_cfg *cfg_node_copy(const weft_cfg *src, size_t *budget, weft_status *st);

/* Interns a file name in the document; NULL when out of memory. */
const char *cfg_intern(weft_config *cfg, const char *name);

/* Moves a detached subtree into the document's graveyard. */
weft_status cfg_bury(weft_config *cfg, weft_cfg *node);

/* "a mapping", "a sequence", "null" or "'text'" (shortened) into buf. */
const char *cfg_describe(const weft_cfg *node, char *buf, size_t len);

/* The path for messages: "'trainer.devices'", or "the top level". */
const char *cfg_name(const weft_cfg *node, char *buf, size_t len);

/* ---- parse.c -------------------------------------------------------- */

/* Parses YAML text into one node (any kind; an empty text is a NULL
 * node). Positions are reported against `file`; `col_base` is added to
 * every column on the first line (for values cut out of an argument).
 * WEFT_ERR_PARSE / WEFT_ERR_CONFIG with the position on error. */
weft_status cfg_parse(weft_config *cfg, const char *file, const char *text, size_t len,
		      uint32_t col_base, weft_cfg **out);

/* ---- strict.c ------------------------------------------------------- */

/* The candidate closest to `word` (weft_edit_distance, case folded)
 * within a distance that makes sense for its length, or NULL. */
const char *cfg_suggest(const char *word, const char *const *cands, size_t n);

#endif /* WEFT_CONFIG_IMPL_H */
