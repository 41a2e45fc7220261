/* cmd_eval.c - `stretch eval` (placeholder until its issue lands: says so and fails). */
#include "cli/cli.h"

int cmd_eval(int argc, char **argv) {
    (void)argc; (void)argv;
    st_error e = {0};
    st_fail(&e, ST_ERR_GENERIC, "'eval' is not built yet");
    return cli_report(&e);
}
