/* Half of a deliberate call cycle for test_structure_checker_finds_cycle:
 * cycle_a.c calls cycle_b.c, which calls back. Never linked. */
int structure_cycle_b_half(int n);

int structure_cycle_a_half(int n)
{
	return n <= 0 ? 0 : structure_cycle_b_half(n - 1) + 1;
}
