#!/bin/sh
# Mixed precision across ranks (real processes over Gloo).
#
# bf16-mixed, ddp on 2 ranks (batch 8 each) against one process with the
# doubled batch (16), both bf16-mixed, 20 steps (precision_lib.sh). The
# first step is the same arithmetic up to the order of float32 sums (the
# gradient all-reduce, OpenBLAS blocking for 8 rows instead of 16): within
# 1e-6 (32-true gives 5e-8). From then on a parameter one float32 ulp
# apart can round to a different bf16 value (2^-9 apart), so the runs
# drift a little: measured at most 5.8e-5 in the loss and 5e-4 in the
# gradient norm on an AMX CPU (bf16 products on the tiles), 2.8e-4 and
# 1.05e-2 (step 20) on an AVX2 CPU (inputs widened, then OpenBLAS, whose
# blocking differs for 8 and 16 rows); tolerances 1e-3 and 5e-2. Wrong
# scaling of the per-rank gradients (a missing average) would be off by
# O(1), and the first step is held to 1e-6 below.
#
# 16-mixed with overflows (initial_scale_power 30, the loss gradient of a
# rank's 8 rows overflows f16 for the first ~10 steps): ranks must agree on
# every skip. zero_2 and zero_3 (gradients reduce-scattered into shards,
# each rank checking only its own shard) against
# ddp on the same 2 ranks: the same skipped steps and the same curve
# within 1e-5 (the same arithmetic; measured identical). tp 2 (each rank
# the whole batch on half the heads) against one process: the same skipped
# steps and the curve within 1e-3 (split products round differently in
# f16; measured 2.8e-5).
set -eu
. "$(dirname "$0")/precision_lib.sh"

fit one16 --trainer.precision=bf16-mixed --data.batch_size=16
fit ddp2 --trainer.precision=bf16-mixed --trainer.devices=2
col one16 train_loss | head -1 > "$dir/a1"
col ddp2 train_loss | head -1 > "$dir/b1"
awk -v a="$(cat "$dir/a1")" -v b="$(cat "$dir/b1")" \
	'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-6 * a) }' ||
	fail "first step: one process $(cat "$dir/a1"), ddp $(cat "$dir/b1")"
close one16 ddp2 train_loss 1e-3
close one16 ddp2 grad_norm 5e-2
grep -q "precision: bf16-mixed" "$dir/ddp2.out" || fail "no precision in the banner"

F16="--trainer.precision=16-mixed --trainer.loss_scale.initial_scale_power=30"
fit ddp $F16 --trainer.devices=2 --trainer.strategy=ddp
ddp_skipped=$(total ddp skipped_steps)
[ "$ddp_skipped" -ge 3 ] || fail "ddp skipped only $ddp_skipped steps: no overflow to agree on"
[ "$(grep -c "optimizer step skipped" "$dir/ddp.out")" = "$ddp_skipped" ] ||
	fail "the overflow warnings are not logged once per skipped step"
for z in zero_2 zero_3; do
	fit "$z" $F16 --trainer.devices=2 --trainer.strategy=$z
	[ "$(total "$z" skipped_steps)" = "$ddp_skipped" ] ||
		fail "$z skipped $(total "$z" skipped_steps) steps, ddp $ddp_skipped"
	close ddp "$z" train_loss 1e-5
	close ddp "$z" loss_scale 0
done

fit one $F16
fit tp $F16 --trainer.devices=2 --trainer.strategy.name=tp --trainer.strategy.size=2
[ "$(total tp skipped_steps)" = "$(total one skipped_steps)" ] ||
	fail "tp skipped $(total tp skipped_steps) steps, one process $(total one skipped_steps)"
close one tp train_loss 1e-3
close one tp loss_scale 0
echo "ok: ddp skipped $ddp_skipped steps, one process $(total one skipped_steps)"
