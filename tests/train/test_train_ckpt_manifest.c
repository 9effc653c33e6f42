/* Every file the checkpoint loader reads must be listed in manifest.json
 * and so checked (size, sha256) before it is read. A manifest that leaves
 * out optimizer.bin let a flipped byte in it load silently; now the
 * loader (`weft fit --trainer.resume`, `weft validate --ckpt`) and
 * `weft ckpt inspect / export` refuse such a checkpoint with one line
 * naming the manifest and the unlisted file. The same for
 * trainer_state.json; the same files fully listed load.
 */
#include "ckpt_test.h"

int main(void)
{
	static const char *const no_optim[] = { "model.safetensors", "trainer_state.json" };
	static const char *const no_state[] = { "model.safetensors", "optimizer.bin" };
	const char *good;
	size_t len = 0;
	char *data;
	int rc;

	tt_scratch("weft_ckpt_manifest");
	good = ckpt_make_good();

	ckpt_copy(good, "unlisted");
	/* a flipped byte in optimizer.bin, which the manifest leaves out */
	data = tt_read(tt_path("unlisted/optimizer.bin"), &len);
	WT_REQUIRE(data && len > 40);
	data[40] ^= 0x5a;
	tt_write(tt_path("unlisted/optimizer.bin"), data, len);
	free(data);
	ckpt_write_manifest(tt_path("unlisted"), no_optim, 2);
	rc = tt_weft("unlisted_fit", "fit", "--config", "mlp.yaml", "--trainer.max_steps=4",
		     "--trainer.resume=unlisted");
	ckpt_expect_error("unlisted_fit", rc,
			  "'unlisted/manifest.json' does not list 'optimizer.bin'");
	rc = tt_weft("unlisted_load", "validate", "--config", "mlp.yaml", "--ckpt", "unlisted");
	ckpt_expect_error("unlisted_load", rc, "does not list 'optimizer.bin'");
	rc = tt_weft("unlisted_inspect", "ckpt", "inspect", "unlisted");
	ckpt_expect_error("unlisted_inspect", rc, "does not list 'optimizer.bin'");
	rc = tt_weft("unlisted_export", "ckpt", "export", "unlisted", "u.safetensors",
		     "--optimizer");
	ckpt_expect_error("unlisted_export", rc, "does not list 'optimizer.bin'");
	WT_CHECK(!tt_exists(tt_path("u.safetensors")));

	ckpt_copy(good, "nostate");
	ckpt_write_manifest(tt_path("nostate"), no_state, 2);
	rc = tt_weft("nostate_fit", "fit", "--config", "mlp.yaml", "--trainer.max_steps=4",
		     "--trainer.resume=nostate");
	ckpt_expect_error("nostate_fit", rc, "does not list 'trainer_state.json'");

	/* the same files, all listed: resumes */
	ckpt_copy(good, "listed");
	rc = tt_weft("listed_fit", "fit", "--config", "mlp.yaml", "--trainer.max_steps=4",
		     "--trainer.resume=listed");
	WT_CHECK(tt_expect_ok("listed_fit", rc));
	rc = tt_weft("listed_inspect", "ckpt", "inspect", "listed");
	WT_CHECK(tt_expect_ok("listed_inspect", rc));
	WT_STR_CONTAINS(tt_output("listed_inspect", "out"), "manifest verified");
	tt_cleanup();
	return wt_done("test_train_ckpt_manifest");
}
