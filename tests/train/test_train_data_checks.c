/* `weft fit` checks the data against the model once, before training:
 *   - a token id past model.vocab_size, placed where the first steps never
 *     draw it, stops the run at start (exit 1, one line naming the file,
 *     the id, its position and the fix) instead of after hours, before
 *     the run directory exists;
 *   - a label past model.num_classes likewise;
 *   - --config naming /dev/zero or a FIFO is refused at once (a FIFO
 *     nobody writes used to block forever; the ctest timeout catches a
 *     hang).
 */
#include "train_test.h"

static void expect_one_line(const char *tag, int rc, const char *a, const char *b)
{
	const char *err = tt_output(tag, "err");
	const char *nl = strchr(err, '\n');

	WT_CHECK(rc == 1);
	WT_CHECK(strncmp(err, "weft: ", 6) == 0);
	WT_CHECK(nl && nl[1] == '\0');
	WT_STR_CONTAINS(err, a);
	WT_STR_CONTAINS(err, b);
}

int main(void)
{
	enum { N = 4096 };
	uint16_t ids[N];
	int rc;

	tt_scratch("weft_train_data_checks");

	/* the bad id is the last token: sequential windows of 8 at batch 2 for
	 * 2 steps never reach it, and there is no validation split */
	for (int i = 0; i < N; i++)
		ids[i] = (uint16_t)(i % 200);
	ids[N - 1] = 300;
	tt_write(tt_path("ids.bin"), ids, sizeof(ids));
	tt_write_text(tt_path("gpt.yaml"),
		      "trainer: {max_steps: 2, enable_progress_bar: false}\n"
		      "model: {class: gpt, n_layer: 1, n_head: 2, n_embd: 16, vocab_size: 256, "
		      "block_size: 8}\n"
		      "data: {class: tokens, path: ids.bin, block_size: 8, batch_size: 2, "
		      "sampling: sequential, val_fraction: 0}\n"
		      "optimizer: {name: sgd, lr: 0.1}\n");
	rc = tt_weft("ids", "fit", "--config", "gpt.yaml");
	expect_one_line("ids", rc, "ids.bin' holds token id 300 at position 4095 (of 4096)",
			"set model.vocab_size to at least 301");
	WT_CHECK(!tt_exists(tt_path("runs"))); /* caught before the run directory exists */
	rc = tt_weft("ids_ok", "fit", "--config", "gpt.yaml", "--model.vocab_size=301");
	WT_CHECK(tt_expect_ok("ids_ok", rc));

	/* a label past the class count, last in the file */
	tt_make_npy_dataset(64, 16, 4);
	{
		size_t len = 0;
		char *y = tt_read(tt_path("y.npy"), &len);
		int32_t bad = 6;

		WT_REQUIRE(y && len > 4);
		memcpy(y + len - 4, &bad, 4);
		tt_write(tt_path("y.npy"), y, len);
		free(y);
	}
	tt_write_text(tt_path("mlp.yaml"),
		      "trainer: {max_steps: 1, enable_progress_bar: false}\n"
		      "model: {class: mlp, in_features: 16, hidden: [8], num_classes: 4}\n"
		      "data: {class: npy, x: x.npy, y: y.npy, batch_size: 8, shuffle: false}\n"
		      "optimizer: {name: sgd, lr: 0.1}\n");
	rc = tt_weft("labels", "fit", "--config", "mlp.yaml");
	expect_one_line("labels", rc, "y.npy' hold class 6 at entry 63",
			"set model.num_classes to at least 7");

	/* configs that are no regular file */
	rc = tt_weft("zero", "fit", "--config", "/dev/zero");
	expect_one_line("zero", rc, "config '/dev/zero' is not a regular file",
			"character device");
	WT_REQUIRE(mkfifo(tt_path("pipe.yaml"), 0600) == 0);
	rc = tt_weft("fifo", "fit", "--config", "pipe.yaml");
	expect_one_line("fifo", rc, "config 'pipe.yaml' is not a regular file", "FIFO");

	tt_cleanup();
	return wt_done("test_train_data_checks");
}
