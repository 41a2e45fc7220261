/* blas.c - which BLAS core and how many threads, and one knob for both thread pools.
 * OpenBLAS picks its kernels from OPENBLAS_CORETYPE (this workplace exports Haswell:
 * AVX2, ~204 GFLOPS sgemm on 2 threads) or by probing the CPU (Cooperlake/SkylakeX on
 * this EPYC: AVX-512, ~340-389 GFLOPS). We report the choice and warn when it leaves
 * AVX-512 unused. */
#include "st_common.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int cpu_has_avx512(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
#else
    return 0;
#endif
}

static int core_is_avx512(const char *core) {
    static const char *names[] = {"SkylakeX", "Cooperlake", "SapphireRapids", "Zen4", NULL};
    for (int i = 0; names[i]; i++) if (strcasecmp(core, names[i]) == 0) return 1;
    return 0;
}

void st_blas_query(st_blas_info *info) {
    memset(info, 0, sizeof *info);
    const char *core = openblas_get_corename();
    snprintf(info->corename, sizeof info->corename, "%s", core ? core : "unknown");
    const char *cfg = openblas_get_config();
    snprintf(info->config, sizeof info->config, "%s", cfg ? cfg : "");
    info->blas_threads = openblas_get_num_threads();
    info->omp_threads = omp_get_max_threads();
    info->cpu_avx512 = cpu_has_avx512();
    info->weak_core = info->cpu_avx512 && !core_is_avx512(info->corename);
}

void st_blas_log(void) {
    st_blas_info bi;
    st_blas_query(&bi);
    const char *env = getenv("OPENBLAS_CORETYPE");
    int par = openblas_get_parallel();
    st_log(ST_LOG_INFO, "BLAS: OpenBLAS core %s (OPENBLAS_CORETYPE=%s), %d BLAS threads (%s), %d OpenMP threads",
           bi.corename, env ? env : "unset", bi.blas_threads,
           par == 2 ? "OpenMP build" : par == 1 ? "pthreads build" : "sequential build", bi.omp_threads);
    if (bi.weak_core)
        st_log(ST_LOG_WARN, "BLAS core %s runs AVX2 kernels but this CPU supports AVX-512: "
               "set OPENBLAS_CORETYPE=SkylakeX (or unset it) for ~1.7-1.9x faster sgemm", bi.corename);
    if (par == 1)
        st_log(ST_LOG_WARN, "pthreads OpenBLAS: its threads and OpenMP's can oversubscribe the cores; "
               "install libopenblas-openmp-dev and rebuild");
}

void st_set_threads(int n) {
    if (n <= 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}
