/* train/checkpoint_files.h - the files of a weft checkpoint directory and
 * the one check of it before any is read.
 *
 * weft fit writes (core/train/checkpoint.c) model.safetensors,
 * optimizer.bin and trainer_state.json, then manifest.json with the size
 * and sha256 of each (runlog/atomic_dir.h). The loader and `weft ckpt`
 * read those three files, so all three must be listed: a manifest that
 * leaves one out would let its contents load unchecked.
 */
#ifndef WEFT_TRAIN_CHECKPOINT_FILES_H
#define WEFT_TRAIN_CHECKPOINT_FILES_H

#include "runlog/atomic_dir.h"

#define WEFT_CKPT_MODEL "model.safetensors"
#define WEFT_CKPT_OPTIMIZER "optimizer.bin"
#define WEFT_CKPT_STATE "trainer_state.json"

/* Checks checkpoint `dir` against its manifest: every listed file has its
 * size and sha256, and each of the three files above is listed. Reads
 * every file whole (hashing). Errors: those of weft_manifest_verify_listed,
 * which name the directory and the file. */
static inline weft_status weft_checkpoint_verify(const char *dir)
{
	static const char *const files[] = { WEFT_CKPT_MODEL, WEFT_CKPT_OPTIMIZER,
					     WEFT_CKPT_STATE };

	return weft_manifest_verify_listed(dir, files, sizeof(files) / sizeof(files[0]));
}

#endif /* WEFT_TRAIN_CHECKPOINT_FILES_H */
