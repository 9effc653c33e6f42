/* metrics.csv: a step column, metrics in first-seen order, empty cells for
 * absent metrics, the header widened (file rewritten) when a new metric
 * appears, RFC 4180 quoting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runlog/metrics_csv.h"
#include "weft_test.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	static char buf[8192];
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

int main(void)
{
	char path[64];
	weft_csv_logger *l = NULL;

	snprintf(path, sizeof(path), "metrics_test_%ld.csv", (long)getpid());
	WT_OK(weft_csv_logger_open(path, &l));
	WT_OK(weft_csv_log(l, 0, (weft_metric[]){ { "train_loss", 2.5 }, { "lr", 0.001 } }, 2));
	WT_OK(weft_csv_log(l, 1, (weft_metric[]){ { "train_loss", 2.25 }, { "lr", 0.002 } }, 2));
	WT_OK(weft_csv_flush(l));
	WT_CHECK(strcmp(slurp(path), "step,train_loss,lr\n0,2.5,0.001\n1,2.25,0.002\n") == 0);

	/* A new metric rewrites the file with the wider header. */
	WT_OK(weft_csv_log(l, 1, (weft_metric[]){ { "val,acc", 0.75 } }, 1));
	WT_OK(weft_csv_log(l, 2, (weft_metric[]){ { "lr", 0.003 }, { "train_loss", 2.0 } }, 2));
	WT_OK(weft_csv_flush(l));
	WT_CHECK(strcmp(slurp(path), "step,train_loss,lr,\"val,acc\"\n"
				     "0,2.5,0.001,\n1,2.25,0.002,\n1,,,0.75\n2,2,0.003,\n") == 0);

	WT_FAILS(weft_csv_log(l, 3, (weft_metric[]){ { "step", 1 } }, 1), WEFT_ERR_INVALID_ARG,
		 "reserved");
	WT_FAILS(weft_csv_log(l, 3, (weft_metric[]){ { "a", 1 }, { "a", 2 } }, 2),
		 WEFT_ERR_INVALID_ARG, "'a' appears twice");
	/* A refused row leaves no trace: the header did not grow. */
	WT_OK(weft_csv_flush(l));
	WT_CHECK(strncmp(slurp(path), "step,train_loss,lr,\"val,acc\"\n", 29) == 0);
	WT_CHECK(strstr(slurp(path), "\n3,") == NULL);
	WT_OK(weft_csv_logger_close(l));
	remove(path);

	WT_FAILS(weft_csv_logger_open("/nonexistent-dir-for-weft/metrics.csv", &l), WEFT_ERR_IO,
		 "/nonexistent-dir-for-weft/metrics.csv");
	return wt_done("test_metrics_csv");
}
