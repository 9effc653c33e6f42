/* Models from the config's `model:` section: defaults, every range check
 * as a config error at the value's file:line:col, init_from. */
#include "nn_test_util.h"

static weft_status build(const char *yaml, weft_model **m)
{
	weft_config *cfg;
	weft_status st;

	*m = NULL;
	WT_OK(weft_config_load_string("m.yaml", yaml, strlen(yaml), &cfg));
	st = weft_model_from_config(weft_cfg_get(weft_config_root(cfg), "model"), NULL, m);
	if (!st)
		st = weft_config_check_unused(cfg);
	weft_config_free(cfg);
	if (st) {
		weft_model_free(*m);
		*m = NULL;
	}
	return st;
}

static void test_defaults(void)
{
	weft_model *m;
	const weft_mlp_config *mc;
	const weft_gpt_config *gc;

	WT_OK(build("model:\n  class: mlp\n", &m));
	mc = weft_model_mlp_config(m);
	WT_REQUIRE(mc && !weft_model_gpt_config(m));
	WT_CHECK(mc->in_features == 784 && mc->n_hidden == 2 && mc->hidden[0] == 256 &&
		 mc->hidden[1] == 256 && mc->out_features == 10 && mc->activation == WEFT_ACT_RELU);
	WT_CHECK(weft_model_num_params(m) == 784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10);
	weft_model_free(m);

	WT_OK(build("model: {class: mlp, in_features: 12, hidden: [], num_classes: 4, "
		    "activation: gelu, dropout: 0.1}\n", &m));
	mc = weft_model_mlp_config(m);
	WT_CHECK(mc->n_hidden == 0 && mc->out_features == 4 && mc->activation == WEFT_ACT_GELU);
	WT_CHECK(mc->dropout == 0.1 && weft_model_num_params(m) == 12 * 4 + 4);
	weft_model_free(m);

	WT_OK(build("model: {class: gpt, n_layer: 1, n_head: 2, n_embd: 8, vocab_size: 11, "
		    "block_size: 5, bias: false}\n", &m));
	gc = weft_model_gpt_config(m);
	WT_REQUIRE(gc != NULL);
	WT_CHECK(gc->n_layer == 1 && gc->n_head == 2 && gc->n_embd == 8 && gc->vocab_size == 11 &&
		 gc->block_size == 5 && !gc->bias && gc->dropout == 0.0);
	WT_CHECK(weft_model_get_class(m) == WEFT_MODEL_GPT && weft_model_ignore_index(m) == -1);
	weft_model_free(m);
}

static void test_errors(void)
{
	weft_model *m;

	WT_FAILS(build("model:\n  class: gpt\n  n_head: 12\n  n_embd: 100\n", &m), WEFT_ERR_CONFIG,
		 "m.yaml:4:11: 'model.n_embd' must be divisible by n_head",
		 "n_embd 100 is not a multiple of n_head 12");
	WT_FAILS(build("model: {class: gpt, n_layer: 0}\n", &m), WEFT_ERR_CONFIG,
		 "m.yaml:1:30: 'model.n_layer' must be >= 1, got 0");
	WT_FAILS(build("model: {class: gpt, n_head: -2}\n", &m), WEFT_ERR_CONFIG,
		 "'model.n_head' must be >= 1, got -2");
	WT_FAILS(build("model: {class: gpt, dropout: 1.5}\n", &m), WEFT_ERR_CONFIG,
		 "m.yaml:1:30: 'model.dropout' must be in [0, 1), got 1.5");
	WT_FAILS(build("model: {class: gpt, n_layer: two}\n", &m), WEFT_ERR_CONFIG,
		 "'model.n_layer' must be an integer", "two");
	WT_FAILS(build("model: {n_layer: 2}\n", &m), WEFT_ERR_CONFIG, "m.yaml:1:8", "class");
	WT_FAILS(build("model: {class: gtp}\n", &m), WEFT_ERR_CONFIG, "m.yaml:1:16", "gtp",
		 "gpt");
	WT_FAILS(build("model: {class: mlp, hidden: 256}\n", &m), WEFT_ERR_CONFIG,
		 "m.yaml:1:29: 'model.hidden' must be a list of hidden layer sizes");
	WT_FAILS(build("model: {class: mlp, hidden: [64, 0]}\n", &m), WEFT_ERR_CONFIG,
		 "m.yaml:1:34: 'model.hidden.1' must be >= 1, got 0");
	WT_FAILS(build("model: {class: mlp, out_features: 10, num_classes: 5}\n", &m),
		 WEFT_ERR_CONFIG, "'model.num_classes' is 5 but out_features is 10");
	WT_FAILS(build("model: {class: mlp, activation: tanh}\n", &m), WEFT_ERR_CONFIG,
		 "m.yaml:1:33", "relu", "gelu");
	WT_FAILS(build("model: {class: mlp, hiden: [3]}\n", &m), WEFT_ERR_CONFIG,
		 "unknown key 'hiden'", "did you mean 'hidden'");
	WT_FAILS(build("model: [1, 2]\n", &m), WEFT_ERR_CONFIG, "m.yaml:1:8: 'model' must be a mapping");
	WT_FAILS(build("trainer: {}\n", &m), WEFT_ERR_CONFIG, "the config has no 'model' section");
	WT_FAILS(build("model:\n  class: mlp\n  init_from: /nonexistent/w.safetensors\n", &m),
		 WEFT_ERR_NOT_FOUND, "m.yaml:3:14: model.init_from",
		 "/nonexistent/w.safetensors: cannot open");
	WT_CHECK(m == NULL);
}

/* init_from loads the weights into the freshly built model (the fixture
 * holds PyTorch's weights for this exact config). */
static void test_init_from(void)
{
	char path[1024];
	weft_model *m = fixture_model("mlp_relu", NULL);
	weft_st_file *f;
	const weft_st_tensor *t;

	WT_OK(weft_st_open(fixture("mlp_relu_weights.safetensors", path, sizeof(path)), &f));
	t = weft_st_find(f, "layers.1.weight");
	WT_REQUIRE(t != NULL);
	WT_CHECK(!memcmp(weft_params_find(weft_model_params(m), "layers.1.weight")->data, t->data,
			 (size_t)(t->end - t->begin)));
	weft_st_close(f);
	weft_model_free(m);
}

int main(void)
{
	test_defaults();
	test_errors();
	test_init_from();
	return wt_done("test_nn_config");
}
