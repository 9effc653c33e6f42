/* Optimizer state slices in flat global coordinates (see optim_state.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include "train/optim_state.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "optimizer state files are little-endian float32; add a byte swap for this host"
#endif

int64_t weft_optim_state_bytes(size_t nslots, int64_t total)
{
	return (int64_t)nslots * total * (int64_t)sizeof(float);
}

static weft_status check_args(const char *what, const char *path, int64_t region_offset,
			      int64_t total, size_t nslots, const void *slots, int64_t begin,
			      int64_t end)
{
	if (region_offset < 0 || total < 0 || begin < 0 || begin > end || end > total)
		return weft_error_set(WEFT_ERR_INVALID_ARG,
				      "%s optimizer state of %s: slice [%lld, %lld) is not inside "
				      "[0, %lld) or the region offset %lld is negative",
				      what, path, (long long)begin, (long long)end, (long long)total,
				      (long long)region_offset);
	if (nslots && begin < end && !slots)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s optimizer state of %s: slots is NULL",
				      what, path);
	return WEFT_OK;
}

weft_status weft_optim_state_write(int fd, const char *path, int64_t region_offset, int64_t total,
				   size_t nslots, const float *const *slots, int64_t begin,
				   int64_t end)
{
	weft_status st = check_args("writing", path, region_offset, total, nslots, slots, begin, end);

	if (st != WEFT_OK)
		return st;
	for (size_t k = 0; k < nslots && begin < end; k++) {
		const char *src = (const char *)slots[k];
		size_t left = (size_t)(end - begin) * sizeof(float);
		off_t at = (off_t)(region_offset + ((int64_t)k * total + begin) * (int64_t)sizeof(float));

		if (!src)
			return weft_error_set(WEFT_ERR_INVALID_ARG,
					      "writing optimizer state of %s: slot %zu is NULL", path, k);
		while (left) {
			ssize_t n = pwrite(fd, src, left, at);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return weft_error_set(WEFT_ERR_IO,
						      "writing optimizer state slot %zu, elements "
						      "[%lld, %lld), to %s at byte %lld: %s",
						      k, (long long)begin, (long long)end, path,
						      (long long)at, n < 0 ? strerror(errno) : "no progress");
			src += n;
			left -= (size_t)n;
			at += n;
		}
	}
	return WEFT_OK;
}

weft_status weft_optim_state_read(int fd, const char *path, int64_t region_offset, int64_t total,
				  size_t nslots, float *const *slots, int64_t begin, int64_t end)
{
	weft_status st = check_args("reading", path, region_offset, total, nslots, slots, begin, end);

	if (st != WEFT_OK)
		return st;
	for (size_t k = 0; k < nslots && begin < end; k++) {
		char *dst = (char *)slots[k];
		size_t left = (size_t)(end - begin) * sizeof(float);
		off_t at = (off_t)(region_offset + ((int64_t)k * total + begin) * (int64_t)sizeof(float));

		if (!dst)
			return weft_error_set(WEFT_ERR_INVALID_ARG,
					      "reading optimizer state of %s: slot %zu is NULL", path, k);
		while (left) {
			ssize_t n = pread(fd, dst, left, at);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return weft_error_set(WEFT_ERR_IO,
						      "reading optimizer state slot %zu from %s at "
						      "byte %lld: %s",
						      k, path, (long long)at, strerror(errno));
			if (n == 0)
				return weft_error_set(WEFT_ERR_CORRUPT,
						      "%s ends at byte %lld, inside the optimizer "
						      "state (slot %zu of %zu, %lld elements per "
						      "slot, region at byte %lld): the checkpoint is "
						      "truncated or was written for a model of "
						      "another size",
						      path, (long long)at, k, nslots, (long long)total,
						      (long long)region_offset);
			dst += n;
			left -= (size_t)n;
			at += n;
		}
	}
	return WEFT_OK;
}
