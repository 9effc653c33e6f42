#!/bin/sh
# `weft plan` asks each strategy for its plan through the ABI (memory_plan):
# - tp size 2 halves exactly the split weights: a GPT of n_layer 2, n_embd 16,
#   vocab 256, block 16 with biases has Psi = 10944; per block c_attn (768 +
#   48), mlp.c_fc (1024 + 64), attn.c_proj.weight (256) and mlp.c_proj.weight
#   (1024) are split, 3184 elements, 6368 in all, so a rank holds
#   10944 - 6368 / 2 = 7760 elements: 31040 bytes (exact, no tolerance);
# - pp's stages (owned parameters per pipeline rank) sum to the whole model;
# - the example local_sgd, built with the member, is asked (its layout line),
#   and the same source built against ABI 1.0 gets a clear "gives no plan".
# usage: test_plan_strategies.sh BUILD_DIR
set -u
B=$1
W=$B/bin/weft
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { # what, command output, expected substring
	case "$2" in *"$3"*) ;; *) echo "FAIL: $1: expected '$3' in:"; echo "$2"; fail=1 ;; esac
}
# a small text corpus: weft plan checks the whole config, data included
i=0
while [ $i -lt 400 ]; do echo "line $i of the plan test's corpus"; i=$((i + 1)); done > "$T/text.txt"
cat > "$T/c.yaml" <<Y
trainer: {accelerator: cpu, devices: 2, strategy: ddp}
model: {class: gpt, n_layer: 2, n_head: 2, n_embd: 16, vocab_size: 256, block_size: 16, bias: true}
data: {class: text, paths: [$T/text.txt], block_size: 16, batch_size: 2}
optimizer: {name: adamw, lr: 1.0e-3}
Y
out=$("$W" plan --config "$T/c.yaml" --world-size 2 --trainer.strategy='{name: tp, size: 2}' 2>&1)
check "tp 2" "$out" "tp 2 x dp 1, 12 of 28 parameters split"
check "tp 2 params" "$out" "params                                31040 B"
out=$("$W" plan --config "$T/c.yaml" --world-size 2 --trainer.strategy=ddp 2>&1)
check "ddp whole" "$out" "params                                43776 B"
for s in '{name: pp}' '{name: hybrid, dp: 2, pp: 2}'; do
	out=$("$W" plan --config "$T/c.yaml" --world-size "$([ "$s" = '{name: pp}' ] && echo 2 || echo 4)" \
		--trainer.strategy="$s" 2>&1)
	sum=$(echo "$out" | sed -n 's/.*owned per pipeline rank: \([0-9 +]*\) = \([0-9]*\)).*/\1 \2/p' |
	      awk '{ t = 0; for (i = 1; i < NF; i++) if ($i != "+") t += $i; print (t == $NF && $NF == 10944) ? "ok" : "bad" }')
	check "$s stages sum to the model" "$sum" "ok"
done
out=$(WEFT_PLUGIN_PATH=$B/tests/sdk/fixtures/current "$W" plan --config "$T/c.yaml" \
	--trainer.strategy='{name: local_sgd, k: 2}' 2>&1)
check "local_sgd asked" "$out" "strategy local_sgd (local SGD, parameters averaged every 2 steps)"
out=$(WEFT_PLUGIN_PATH=$B/tests/sdk/fixtures/abi-1.0 "$W" plan --config "$T/c.yaml" \
	--trainer.strategy='{name: local_sgd, k: 2}' 2>&1)
check "1.0 local_sgd refused" "$out" "gives no plan: it was built against weft plugin ABI 1.0"
check "1.0 local_sgd advice" "$out" "memory_plan"
[ $fail = 0 ] && echo "test_plan_strategies: ok"
exit $fail
