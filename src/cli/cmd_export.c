/* cmd_export.c - `stretch export` (placeholder until its issue lands: says so and fails). */
#include "cli/cli.h"

int cmd_export(int argc, char **argv) {
    (void)argc; (void)argv;
    st_error e = {0};
    st_fail(&e, ST_ERR_GENERIC, "'export' is not built yet");
    return cli_report(&e);
}
