/* tests/quant_rows_dump.c: rounds a file of float32 values with quant_rows (libquant.a, linked
 * statically) and writes the results, for python/tests/test_quantize.py, which compares
 * adaptsim.quantize (the shared object python/adaptsim/_libadaptquant.so) with them bit for bit.
 *
 *   tests/quant_rows_dump [-D NAME=FORMAT]... IN ROWS COLS SEED STREAM INDEX \
 *                         FORMAT MODE OUT [FORMAT MODE OUT]...
 *
 * IN holds ROWS * COLS native float32 values (row-major); each FORMAT MODE OUT rounds them with
 * quant_spec_parse(FORMAT), rounding MODE (nearest, stochastic, nearest-away; bfp and muppet
 * with a "-dim0" suffix take one scale per row) and key (SEED, STREAM, INDEX), writes OUT (raw
 * float32) and prints "FORMAT MODE saturated flushed zeros". -D registers a named format first
 * (quant_format_define), as a configuration's [format NAME] section does. Exit 1 on any error. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/status.h"
#include "src/quant/quant.h"

static int die(const char *what, const char *msg)
{
    fprintf(stderr, "quant_rows_dump: %s: %s\n", what, msg);
    return 1;
}

static int u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 0);
    if (errno || end == s || *end) return 0;
    *v = x;
    return 1;
}

int main(int argc, char **argv)
{
    int a = 1;
    while (a + 1 < argc && !strcmp(argv[a], "-D")) {
        char name[QUANT_FORMAT_NAME_MAX + 1];
        const char *eq = strchr(argv[a + 1], '=');
        if (!eq || (size_t)(eq - argv[a + 1]) > QUANT_FORMAT_NAME_MAX)
            return die(argv[a + 1], "expected NAME=FORMAT");
        memcpy(name, argv[a + 1], (size_t)(eq - argv[a + 1]));
        name[eq - argv[a + 1]] = 0;
        struct quant_spec s;
        if (quant_spec_parse(eq + 1, &s) != ADAPT_OK || quant_format_define(name, &s) != ADAPT_OK)
            return die(argv[a + 1], adapt_error_message());
        a += 2;
    }
    uint64_t rows, cols, seed, stream, index;
    if (argc - a < 9 || (argc - a - 6) % 3 || !u64(argv[a + 1], &rows) ||
        !u64(argv[a + 2], &cols) || !u64(argv[a + 3], &seed) || !u64(argv[a + 4], &stream) ||
        !u64(argv[a + 5], &index)) {
        fprintf(stderr, "usage: quant_rows_dump [-D NAME=FORMAT]... IN ROWS COLS SEED STREAM "
                        "INDEX FORMAT MODE OUT [FORMAT MODE OUT]...\n");
        return 2;
    }
    size_t n = (size_t)(rows * cols);
    float *x = malloc((n ? n : 1) * sizeof *x), *y = malloc((n ? n : 1) * sizeof *y);
    if (!x || !y) return die("memory", "out of memory");
    FILE *f = fopen(argv[a], "rb");
    if (!f || fread(x, sizeof *x, n, f) != n) return die(argv[a], "cannot read ROWS*COLS floats");
    fclose(f);
    for (int k = a + 6; k < argc; k += 3) {
        const char *mode = argv[k + 1];
        struct quant_spec s;
        if (quant_spec_parse(argv[k], &s) != ADAPT_OK) return die(argv[k], adapt_error_message());
        size_t ml = strlen(mode);
        if (ml > 5 && !strcmp(mode + ml - 5, "-dim0")) {
            s.block = QUANT_BLOCK_DIM0;
            ml -= 5;
        }
        if (ml == 7 && !strncmp(mode, "nearest", 7))
            s.rounding = QUANT_ROUND_NEAREST;
        else if (ml == 12 && !strncmp(mode, "nearest-away", 12))
            s.rounding = QUANT_ROUND_NEAREST, s.tie = QUANT_TIE_AWAY;
        else if (ml == 10 && !strncmp(mode, "stochastic", 10))
            s.rounding = QUANT_ROUND_STOCHASTIC;
        else
            return die(mode, "unknown mode");
        struct quant_key key = {seed, stream, index};
        struct quant_stats st = {0, 0, 0};
        if (quant_rows(&s, x, y, (size_t)rows, (size_t)cols, key, NULL, &st) != ADAPT_OK)
            return die(argv[k], adapt_error_message());
        FILE *o = fopen(argv[k + 2], "wb");
        if (!o || fwrite(y, sizeof *y, n, o) != n || fclose(o))
            return die(argv[k + 2], "cannot write");
        printf("%s %s %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", argv[k], mode, st.saturated,
               st.flushed, st.zeros);
    }
    free(x);
    free(y);
    return 0;
}
