/* SPDX-License-Identifier: MIT */
/*
 * driver.c - a fuzz target's corpus as a regression test, without
 * libFuzzer: every file under the directories (or the files) named on
 * the command line goes once through LLVMFuzzerTestOneInput(), in a build
 * with or without the sanitizers. Prints "fuzz: N inputs" and exits 0;
 * a target that finds a fault traps or the sanitizer stops it.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int one(const char *path, long *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long len;

	if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET)) {
		fprintf(stderr, "fuzz: cannot read %s\n", path);
		if (f)
			fclose(f);
		return -1;
	}
	buf = malloc(len ? (size_t)len : 1);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "fuzz: cannot read %s\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	(*n)++;
	return 0;
}

static int walk(const char *path, long *n)
{
	struct dirent **ents;
	char sub[4096];
	struct stat sb;
	int i, k, ret = 0;

	if (stat(path, &sb))
		return fprintf(stderr, "fuzz: no %s\n", path), -1;
	if (!S_ISDIR(sb.st_mode))
		return one(path, n);
	/* sorted: the same order every run */
	k = scandir(path, &ents, NULL, alphasort);
	if (k < 0)
		return fprintf(stderr, "fuzz: cannot list %s\n", path), -1;
	for (i = 0; i < k; i++) {
		if (ents[i]->d_name[0] != '.' && !ret) {
			snprintf(sub, sizeof(sub), "%s/%s", path,
				 ents[i]->d_name);
			ret = walk(sub, n);
		}
		free(ents[i]);
	}
	free(ents);
	return ret;
}

int main(int argc, char **argv)
{
	long n = 0;
	int i;

	for (i = 1; i < argc; i++)
		if (walk(argv[i], &n))
			return 1;
	printf("fuzz: %ld inputs\n", n);
	/* an empty corpus is a mistake, not a pass */
	return n > 0 ? 0 : 1;
}
