/* blas.c - which BLAS core and how many threads, and one knob for both thread pools.
 * OpenBLAS picks its kernels from OPENBLAS_CORETYPE (this workplace exports Haswell:
 * AVX2, ~204 GFLOPS sgemm on 2 threads) or by probing the CPU. The probe of a release
 * older than the CPU can fall far short: Debian's 0.3.21 does not know the Xeon of family
 * 6 model 207 and falls back to Prescott (SSE3), 34 GFLOPS on one core where SkylakeX's
 * AVX-512 kernels run 155. So the CLI forces the best core the CPU supports when the
 * variable is unset (st_blas_better_core), and we report the choice and warn when an
 * explicit setting leaves vector width unused. */
#include "st_common.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Vector classes, in order: what a CPU supports and what an OpenBLAS core uses. */
enum { ISA_OTHER = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 };

static int cpu_isa(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    /* SkylakeX's kernels use F, BW, VL and DQ */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return ISA_AVX2;
#endif
    return ISA_OTHER;
}

/* OpenBLAS 0.3.x core names by the widest vectors their sgemm kernels use; every other
 * name (Prescott, Nehalem, Sandybridge, ...) is SSE or 256-bit AVX without FMA. */
static int core_isa(const char *core) {
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids", "Zen4", NULL};
    static const char *const avx2[] = {"Haswell", "Zen", "Excavator", NULL};
    for (int i = 0; avx512[i]; i++) if (strcasecmp(core, avx512[i]) == 0) return ISA_AVX512;
    for (int i = 0; avx2[i]; i++) if (strcasecmp(core, avx2[i]) == 0) return ISA_AVX2;
    return ISA_OTHER;
}

/* The names OPENBLAS_CORETYPE takes on x86 (the corename[] of OpenBLAS 0.3.x's
 * driver/others/dynamic.c; SapphireRapids from 0.3.22). OpenBLAS says nothing about any
 * other name: it runs its probe's choice instead, so a typo would benchmark another core. */
static const char *const x86_cores[] = {
    "Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Atom", "Core2", "Penryn", "Dunnington", "Nehalem",
    "Athlon", "Opteron", "Opteron_SSE3", "Barcelona", "Nano", "Sandybridge", "Bobcat", "Bulldozer", "Piledriver",
    "Haswell", "Steamroller", "Excavator", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", NULL};

int st_blas_core_known(const char *core) {
#if defined(__x86_64__) || defined(__i386__)
    for (int i = 0; x86_cores[i]; i++)
        if (strcasecmp(core, x86_cores[i]) == 0) return 1;
    return 0;
#else
    (void)core;
    return 1;   /* other architectures' names are not listed here */
#endif
}

void st_blas_core_names(char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; x86_cores[i] && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? ", " : "", x86_cores[i]);
}

const char *st_blas_best_core(void) {
    const int cpu = cpu_isa();
    return cpu == ISA_AVX512 ? "SkylakeX" : cpu == ISA_AVX2 ? "Haswell" : NULL;
}

const char *st_blas_better_core(void) {
    const char *core = openblas_get_corename();
    if (!core || core_isa(core) >= cpu_isa()) return NULL;
    return st_blas_best_core();
}

const char *st_blas_core_unsupported(const char *core) {
    const int need = core ? core_isa(core) : ISA_OTHER;
    if (need <= cpu_isa()) return NULL;
    return need == ISA_AVX512 ? "AVX-512 (F, BW, VL, DQ)" : "AVX2 and FMA";
}

void st_blas_query(st_blas_info *info) {
    memset(info, 0, sizeof *info);
    const char *core = openblas_get_corename();
    snprintf(info->corename, sizeof info->corename, "%s", core ? core : "unknown");
    const char *cfg = openblas_get_config();
    snprintf(info->config, sizeof info->config, "%s", cfg ? cfg : "");
    info->blas_threads = openblas_get_num_threads();
    info->omp_threads = omp_get_max_threads();
    info->cpu_avx512 = cpu_isa() == ISA_AVX512;
    info->weak_core = st_blas_better_core() != NULL;
}

void st_blas_log(void) {
    st_blas_info bi;
    st_blas_query(&bi);
    const char *env = getenv("OPENBLAS_CORETYPE");
    /* set by cli/main.c when it forced the core: what OpenBLAS's own probe had picked */
    const char *probed = getenv("STRETCH_BLAS_PROBED");
    char how[96] = "";
    /* set by cli/main.c when the environment named a core this CPU cannot run */
    const char *refused = getenv("STRETCH_BLAS_REFUSED");
    const char *lacks = refused ? st_blas_core_unsupported(refused) : NULL;
    if (probed && env) snprintf(how, sizeof how, ", set by stretch: OpenBLAS's probe chose %.40s", probed);
    if (refused)
        st_log(ST_LOG_WARN, "OPENBLAS_CORETYPE=%s needs %s, which this CPU lacks (its kernels would stop at the "
               "first product with an illegal instruction): running core %s instead", refused,
               lacks ? lacks : "?", bi.corename);
    /* OpenBLAS runs another core without a word for a name it does not know, or one it
     * cannot run here (Katmai, a 32-bit core, becomes Prescott on x86-64) */
    if (env && !refused && strcasecmp(env, bi.corename) != 0)
        st_log(ST_LOG_WARN, "OPENBLAS_CORETYPE=%s: OpenBLAS runs core %s instead (%s)", env, bi.corename,
               st_blas_core_known(env) ? "it does not run that core on this CPU, or this build lacks it"
                                       : "not a core name OpenBLAS knows");
    int par = openblas_get_parallel();
    st_log(ST_LOG_INFO, "BLAS: OpenBLAS core %s (OPENBLAS_CORETYPE=%s%s), %d BLAS threads (%s), %d OpenMP threads",
           bi.corename, env ? env : "unset", how, bi.blas_threads,
           par == 2 ? "OpenMP build" : par == 1 ? "pthreads build" : "sequential build", bi.omp_threads);
    const char *better = st_blas_better_core();
    if (better)
        st_log(ST_LOG_WARN, "BLAS core %s leaves this CPU's %s unused: set OPENBLAS_CORETYPE=%s (or unset it) "
               "for faster sgemm (~1.8x over Haswell's AVX2 kernels, ~4.6x over Prescott's SSE3)",
               bi.corename, cpu_isa() == ISA_AVX512 ? "AVX-512" : "AVX2 and FMA", better);
    if (par == 1)
        st_log(ST_LOG_WARN, "pthreads OpenBLAS: its threads and OpenMP's can oversubscribe the cores; "
               "install libopenblas-openmp-dev and rebuild");
}

int st_set_threads(int n) {
    const int asked = n;
    if (n <= 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
    /* OpenBLAS caps the count at the CPUs it was built for (and sets OpenMP's to match),
     * OMP_THREAD_LIMIT caps OpenMP's teams: results are bit-identical for a fixed count
     * only, so a count other than the one asked for is said (0 = all cores asks none) */
    int used = openblas_get_num_threads();
    if (omp_get_max_threads() < used) used = omp_get_max_threads();
    if (omp_get_thread_limit() < used) used = omp_get_thread_limit();
    if (asked > 0 && used != asked)
        st_log(ST_LOG_WARN, "threads: %d asked for (train.threads or --threads), %d used: this OpenBLAS/OpenMP runs "
               "at most %d (the machine has %d cores)", asked, used, used, omp_get_num_procs());
    return used;
}
