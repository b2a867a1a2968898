// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * A program built as a user of an installed oxe builds theirs: against the
 * installed oxedv.h, linked through the installed liboxe.pc. It opens DEV
 * through whichever oxe provider libibverbs loaded, uses a standard verb and
 * a direct verb on it, and prints the path the provider's library was mapped
 * from, so that the install suite (qemu-test/guest/suites/install.sh) can
 * check it is the installed copy.
 *   staged_provider DEV
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <infiniband/oxedv.h>

static int fail(const char *what, int err)
{
	fprintf(stderr, "staged_provider: %s: %s\n", what, strerror(err));
	return 1;
}

/* Prints each distinct file of the provider mapped into this process. */
static int print_provider_maps(void)
{
	char line[4096], last[4096] = "";
	FILE *f = fopen("/proc/self/maps", "r");
	int found = 0;

	if (!f)
		return fail("/proc/self/maps", errno);
	while (fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');

		if (!path || !strstr(path, "liboxe-rdmav"))
			continue;
		if (strcmp(path, last)) {
			fputs(path, stdout);
			strcpy(last, path);
			found++;
		}
	}
	fclose(f);
	if (!found)
		fprintf(stderr, "staged_provider: no oxe provider mapped\n");
	return found ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct ibv_device **list, *dev = NULL;
	struct oxedv_device_attr attr = {};
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	static char buf[4096];
	int n, i, rc;

	if (argc != 2) {
		fprintf(stderr, "usage: staged_provider DEV\n");
		return 2;
	}
	list = ibv_get_device_list(&n);
	if (!list)
		return fail("ibv_get_device_list", errno);
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "staged_provider: no device %s\n", argv[1]);
		return 1;
	}
	if (!oxedv_is_supported(dev)) {
		fprintf(stderr, "staged_provider: %s is not an oxe device to its provider\n", argv[1]);
		return 1;
	}
	ctx = ibv_open_device(dev);
	if (!ctx)
		return fail("ibv_open_device", errno);
	rc = oxedv_query_device(ctx, &attr);
	if (rc)
		return fail("oxedv_query_device", rc);
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		return fail("ibv_alloc_pd", errno);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		return fail("ibv_reg_mr", errno);
	if (mr->addr != buf || mr->length != sizeof(buf))
		return fail("ibv_reg_mr gave another range", EINVAL);
	rc = print_provider_maps();
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return rc;
}
