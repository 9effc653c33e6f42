/* The comm backend's buffers of a strategy's communicators (plan_comm.h). */
#include <stdio.h>
#include <string.h>

#include "plan/plan_comm.h"

int64_t plan_gloo_shm_bytes(int64_t n)
{
	if (n <= 1)
		return 0;
	return 4096 + (128 * n + 4095) / 4096 * 4096 + n * (1 << 20);
}

void plan_sub_comms(const weft_plan_result *r, weft_plan *p)
{
	int n = r->n_sub_comms < 8 ? r->n_sub_comms : 8, used, more = 0;

	if (p->comm_backend_bytes <= 0 || n <= 0)
		return;
	for (int i = 0; i < n; i++)
		if (r->sub_comm_size[i] > 1 && r->sub_comm_size[i] <= 64) {
			p->comm_backend_bytes += plan_gloo_shm_bytes(r->sub_comm_size[i]);
			more++;
		}
	used = (int)strlen(p->comm_backend);
	if (more && used < (int)sizeof(p->comm_backend))
		snprintf(p->comm_backend + used, sizeof(p->comm_backend) - (size_t)used,
			 "; a segment more for each of %d split communicator%s", more,
			 more == 1 ? "" : "s");
}
