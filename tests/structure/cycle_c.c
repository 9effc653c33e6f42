/* Calls into the deliberate cycle (see cycle_a.c) without being part of
 * it: an allow-list naming cycle_a.c and cycle_c.c is stale. */
int structure_cycle_a_half(int n);

int structure_cycle_outside(int n)
{
	return structure_cycle_a_half(n);
}
