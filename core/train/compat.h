/* train/compat.h - configs written for Lightning and DeepSpeed, in weft's terms.
 *
 * weft_config_compat rewrites a loaded config in place, once, before
 * anything reads it (weft fit, validate, test, weft plan and
 * --print-config all call it, so each sees the same resolved values):
 *
 * - Lightning's spellings: trainer.strategy deepspeed, deepspeed_stage_1/2/3,
 *   fsdp, ddp_spawn, ddp_find_unused_parameters_true/false; trainer.precision
 *   16, bf16, bf16-true (refused); trainer.accelerator gpu and auto;
 *   trainer.devices -1 (and auto with cuda outside a launcher).
 * - optimizer: {type: AdamW, params: {...}} (DeepSpeed's shape) becomes
 *   {name: adamw, ...}; a built-in optimizer's name matches in any case.
 * - A DeepSpeed config (`deepspeed_path`, else the config's `deepspeed:` key,
 *   relative to the config's folder) is translated into trainer, data,
 *   optimizer and lr_scheduler keys; a value it gives that the YAML also
 *   gives differently is an error naming both places. docs/config.md
 *   ("DeepSpeed and Lightning configs") lists each key.
 *
 * The values taken verbatim from the DeepSpeed file keep its file:line:col,
 * so later checks point into that file.
 */
#ifndef WEFT_TRAIN_COMPAT_H
#define WEFT_TRAIN_COMPAT_H

#include "weft/config.h"
#include "weft/status.h"

/* Rewrites `cfg` as described above. `config_path` is the YAML's path (the
 * folder a `deepspeed:` key is relative to; NULL: the working directory);
 * `deepspeed_path` is weft fit's --deepspeed (NULL: none). Idempotent on a
 * config it already rewrote when deepspeed_path is NULL. Logs one info line
 * for a strategy that runs as another (fsdp as zero_3), one warning listing
 * DeepSpeed keys it ignores; the process the user started says them and
 * sets WEFT_COMPAT_SAID so that the ranks it launches stay quiet. Errors: WEFT_ERR_CONFIG at the offending key
 * (a batch triple that does not fit the world names the three values and
 * the world; a refused key says why and what to use); WEFT_ERR_IO for a
 * DeepSpeed file that cannot be read. */
weft_status weft_config_compat(weft_config *cfg, const char *config_path,
			       const char *deepspeed_path);

#endif /* WEFT_TRAIN_COMPAT_H */
