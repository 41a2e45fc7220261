/* cmd_selfcheck.c - `stretch selfcheck` (placeholder until its issue lands: says so and fails). */
#include "cli/cli.h"

int cmd_selfcheck(int argc, char **argv) {
    (void)argc; (void)argv;
    st_error e = {0};
    st_fail(&e, ST_ERR_GENERIC, "'selfcheck' is not built yet");
    return cli_report(&e);
}
