// gloo_direct: the baseline for `weft bench comm --backend gloo`. The same
// libgloo, called directly: ring all_reduce (gloo::allreduce, sum of
// floats), same sizes, warm-up and iteration counts, same busbw formula.
// Usage: gloo_direct RANK SIZE STORE_DIR [MAX_BYTES] (run SIZE copies).
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: gloo_direct RANK SIZE STORE_DIR [MAX_BYTES]\n");
		return 2;
	}
	int rank = atoi(argv[1]), size = atoi(argv[2]);
	long long max_bytes = argc > 4 ? atoll(argv[4]) : 64ll << 20;
	const int warmup = 5, iters = 20;
	gloo::rendezvous::FileStore store(argv[3]);
	gloo::transport::tcp::attr attr;
	attr.hostname = "127.0.0.1";
	auto dev = gloo::transport::tcp::CreateDevice(attr);
	auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
	ctx->connectFullMesh(store, dev);
	std::vector<float> in(max_bytes / 4), out(max_bytes / 4);

	if (rank == 0)
		printf("#%12s %13s %10s %8s %8s\n", "size(B)", "count", "time(us)", "algbw", "busbw");
	for (long long bytes = 8; bytes <= max_bytes; bytes *= 2) {
		size_t count = bytes / 4;
		auto run = [&] {
			gloo::AllreduceOptions opts(ctx);
			opts.setInput(in.data(), count);
			opts.setOutput(out.data(), count);
			opts.setReduceFunction([](void *o, const void *a, const void *b, size_t n) {
				float *x = (float *)o;
				const float *p = (const float *)a, *q = (const float *)b;
				for (size_t i = 0; i < n; i++)
					x[i] = p[i] + q[i];
			});
			gloo::allreduce(opts);
		};
		for (size_t i = 0; i < count; i++)
			in[i] = (float)(rank + 1);
		for (int w = 0; w < warmup; w++)
			run();
		gloo::BarrierOptions b(ctx);
		gloo::barrier(b);
		auto t0 = std::chrono::steady_clock::now();
		for (int it = 0; it < iters; it++)
			run();
		double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
		// the slowest rank's time
		gloo::AllreduceOptions m(ctx);
		m.setOutput(&secs, 1);
		m.setReduceFunction([](void *o, const void *a, const void *b, size_t n) {
			double *x = (double *)o;
			const double *p = (const double *)a, *q = (const double *)b;
			for (size_t i = 0; i < n; i++)
				x[i] = p[i] > q[i] ? p[i] : q[i];
		});
		gloo::allreduce(m);
		double algbw = bytes / secs / 1e9;
		if (rank == 0)
			printf(" %12lld %13zu %10.1f %8.2f %8.2f\n", bytes, count, secs * 1e6, algbw,
			       algbw * 2.0 * (size - 1) / size);
		fflush(stdout);
	}
	return 0;
}
