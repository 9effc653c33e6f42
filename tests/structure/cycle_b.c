/* The other half of the deliberate cycle (see cycle_a.c). */
int structure_cycle_a_half(int n);

int structure_cycle_b_half(int n)
{
	return n <= 0 ? 0 : structure_cycle_a_half(n - 1) + 1;
}
