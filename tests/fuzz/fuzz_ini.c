/* tests/fuzz/fuzz_ini.c: libFuzzer harness for the run configuration: an INI
 * file loaded, checked, printed and read back. Checking parses policy.format,
 * which may name a rounding plugin: loading plugins is turned off here, so no
 * input runs code from a file it names. */
#include "src/config/config.h"
#include "src/quant/quant.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct adapt_config cfg, again;
    quant_plugin_forbid();
    quant_format_clear(); /* each input defines its own [format NAME] sections */
    adapt_config_init(&cfg);
    const char *p = fuzz_file(data, size, "x.ini");
    if (adapt_config_load(&cfg, p) != ADAPT_OK || adapt_config_check(&cfg) != ADAPT_OK) return 0;
    /* what it prints, it reads back equal (except values it cannot print) */
    char printed[256];
    snprintf(printed, sizeof printed, "%s.out", p);
    FILE *f = fopen(printed, "w");
    if (!f) abort();
    enum adapt_status st = adapt_config_print(&cfg, f, 0);
    if (fclose(f) != 0) abort();
    if (st != ADAPT_OK) return 0;
    adapt_config_init(&again);
    if (adapt_config_load(&again, printed) == ADAPT_OK) {
        char diff[128];
        memcpy(again.file, cfg.file, sizeof again.file);
        (void)adapt_config_equal(&cfg, &again, diff, sizeof diff);
    }
    return 0;
}
