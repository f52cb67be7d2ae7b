/* tests/fuzz/fuzz.h: what the libFuzzer harnesses share: the parsers read
 * files, so each input is written to a file in a private directory first.
 *
 *   const char *p = fuzz_file(data, size, "x.safetensors");
 *   adapt_safetensors_load(&f, p);
 *
 * Test code only: aborts when the file cannot be written.
 */
#ifndef ADAPT_TESTS_FUZZ_H
#define ADAPT_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/base/log.h"

static char fuzz_dir[64];

static void fuzz_cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir);
    if (fuzz_dir[0] && system(cmd) != 0) fprintf(stderr, "fuzz: cannot remove %s\n", fuzz_dir);
}

/* Writes the input to <private dir>/name and returns that path (a static buffer). */
static const char *fuzz_file(const uint8_t *data, size_t size, const char *name)
{
    static char path[192];
    if (!fuzz_dir[0]) {
        snprintf(fuzz_dir, sizeof fuzz_dir, "%s/adapt-fuzz-XXXXXX",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (!mkdtemp(fuzz_dir)) abort();
        atexit(fuzz_cleanup);
        adapt_log_set_level(ADAPT_LOG_ERROR); /* parsers' warnings are expected */
    }
    snprintf(path, sizeof path, "%s/%s", fuzz_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) abort();
    return path;
}

#endif
