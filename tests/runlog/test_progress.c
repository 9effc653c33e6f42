/* The progress display under a fake clock: the bar (carriage return, clear
 * to end of line, percent, step/total, it/s, ETA, metrics) and the plain
 * periodic lines for non-terminals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runlog/progress.h"
#include "weft_test.h"

static double fake_now;

static double fake_clock(void)
{
	return fake_now;
}

static char *read_all(FILE *f)
{
	static char buf[16384];
	size_t n;

	fflush(f);
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	return buf;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

int main(void)
{
	weft_progress p;
	weft_metric m[2] = { { "loss", 0.5123 }, { "val_acc", 0.875 } };
	char buf[32];
	FILE *f;

	WT_CHECK(strcmp(weft_format_duration(5, buf, sizeof(buf)), "00:05") == 0);
	WT_CHECK(strcmp(weft_format_duration(3725, buf, sizeof(buf)), "1:02:05") == 0);
	WT_CHECK(strcmp(weft_format_duration(-1, buf, sizeof(buf)), "?") == 0);

	/* Terminal: 100 steps at 16 steps/s, redrawn at most every 1/8 s.
	 * Times are exact binary fractions so the draw count is exact: steps
	 * 1, 3, ..., 99 draw (50), plus the end of the epoch. */
	f = tmpfile();
	WT_REQUIRE(f);
	weft_progress_init(&p, &(weft_progress_opts){ .out = f, .tty = 1, .enabled = 1,
						       .refresh_s = 0.125, .clock = fake_clock });
	fake_now = 10.0;
	weft_progress_start_epoch(&p, 3, 100, 0);
	for (int s = 1; s <= 100; s++) {
		fake_now = 10.0 + s * 0.0625;
		weft_progress_update(&p, s, m, 1);
	}
	weft_progress_end_epoch(&p, m, 2);
	{
		char *out = read_all(f);
		int draws = count(out, "\r");

		WT_CHECK(draws == 51);
		WT_CHECK(count(out, "\033[K") == draws);
		WT_STR_CONTAINS(out, "\rEpoch 3:   1%|");
		WT_STR_CONTAINS(out, "Epoch 3: 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588"
				     "\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588"
				     "\u2588\u2588\u2588\u2588| 100/100 [00:06<00:00, 16.00it/s, "
				     "loss=0.5123, val_acc=0.875]\033[K\n");
		/* Exactly one newline: the bar redraws in place. */
		WT_CHECK(count(out, "\n") == 1);
	}
	/* Mid-epoch: 2 s for 32 steps is 16 it/s, 68 steps left is 4.25 s. */
	fake_now = 12.0;
	p.t_start = 10.0;
	p.step = 32;
	WT_CHECK(strcmp(weft_progress_format(&p, m, 1, fake_now),
			"Epoch 3:  32%|\u2588\u2588\u2588\u2588\u2588\u2588\u258d"
			"             | 32/100 [00:02<00:04, 16.00it/s, loss=0.5123]") == 0);
	fclose(f);

	/* Plain lines: one per 25 steps, and slow steps show s/it. */
	f = tmpfile();
	WT_REQUIRE(f);
	weft_progress_init(&p, &(weft_progress_opts){ .out = f, .tty = 0, .enabled = 1,
						       .log_every = 25, .clock = fake_clock });
	fake_now = 0;
	weft_progress_start_epoch(&p, 0, 100, 0);
	for (int s = 1; s <= 100; s++) {
		fake_now = s * 2.0;
		weft_progress_update(&p, s, m, 1);
	}
	weft_progress_end_epoch(&p, m, 2);
	{
		char *out = read_all(f);

		WT_CHECK(count(out, "\n") == 5); /* steps 25, 50, 75, 100, end */
		WT_CHECK(count(out, "\r") == 0 && count(out, "\033") == 0);
		WT_STR_CONTAINS(out, "Epoch 0: 25/100 (25%) [00:50<02:30, 2.00s/it] loss=0.5123\n");
		WT_STR_CONTAINS(out, "Epoch 0: 100/100 (100%) [03:20<00:00, 2.00s/it] loss=0.5123 "
				     "val_acc=0.875\n");
	}
	fclose(f);

	/* Resuming mid-epoch: the rate counts only steps done since the resume. */
	f = tmpfile();
	weft_progress_init(&p, &(weft_progress_opts){ .out = f, .tty = 0, .enabled = 1,
						       .clock = fake_clock });
	fake_now = 0;
	weft_progress_start_epoch(&p, 1, 1000, 600);
	fake_now = 4;
	p.step = 640;
	WT_STR_CONTAINS(weft_progress_format(&p, NULL, 0, fake_now),
			"Epoch 1: 640/1000 (64%) [00:04<00:36, 10.00it/s]");
	/* a rate such as tokens/s in whole units, small values in 4 digits */
	{
		const weft_metric tm[3] = { { "loss", 0.51234 }, { "tokens/s", 123456.7 },
					    { "mfu", 0.3125 } };

		WT_STR_CONTAINS(weft_progress_format(&p, tm, 3, fake_now),
				"loss=0.5123 tokens/s=123457 mfu=0.3125");
	}
	fclose(f);

	/* Disabled (ranks other than 0): nothing at all. */
	f = tmpfile();
	weft_progress_init(&p, &(weft_progress_opts){ .out = f, .tty = 1, .enabled = 0,
						       .clock = fake_clock });
	weft_progress_start_epoch(&p, 0, 10, 0);
	weft_progress_update(&p, 5, m, 1);
	weft_progress_end_epoch(&p, m, 1);
	WT_CHECK(read_all(f)[0] == '\0');
	fclose(f);
	return wt_done("test_progress");
}
