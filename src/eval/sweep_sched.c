/* sweep_sched.c - which process runs which sweep point, and when.
 *
 * Two levels, composable:
 *   MPI ranks (opts->dist, N ranks): point i belongs to rank i mod N; each rank works
 *   through its share, then every point's outcome (state, status) goes to rank 0 by an
 *   element-wise maximum (each slot is filled by its owner only), and rank 0 reads the
 *   finished points' markers (sweep_done.json) to build the tables: the run directories
 *   must therefore be on a file system rank 0 can read.
 *   Jobs (s->jobs, per rank): up to `jobs` points at a time, each in a child process
 *   (fork) that trains and evaluates it and reports through a pipe; the parent hands the
 *   next pending point to the first free slot. With jobs > 1 and no --threads, each run
 *   gets max(1, cores / jobs) threads, so two single-threaded runs share two cores.
 * A half-finished sweep resumes either way: finished points are skipped by their marker,
 * interrupted trainings resume from their checkpoints (st_sweep_run_point).
 *
 * Signals with jobs > 1: Ctrl-C reaches the whole process group, so each child saves its
 * run and exits 130; so does a hangup (SIGHUP from a closed terminal or ssh session goes
 * to every process of the job), unless nohup had it ignored; a SIGTERM sent to the parent
 * alone is forwarded to the children. The parent stops handing out points and waits for
 * the children either way: a parent that died of the hangup would send its children
 * SIGTERM (below) on top of their SIGHUP, and a second signal ends a training at once,
 * without its checkpoint. A parent
 * that dies without forwarding (SIGKILL, the OOM killer) leaves no orphans on Linux: each
 * child asked for SIGTERM on its parent's death (PR_SET_PDEATHSIG), so it saves its run
 * and ends instead of training on, holding OUT's lock, with no one to collect it. */
#define _GNU_SOURCE
#include "sweep_internal.h"
#include "st_dist.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* The signal handler's only channel (as in trainer.c): the first SIGINT/SIGTERM/SIGHUP. */
static volatile sig_atomic_t g_sweep_signal;

static void on_sweep_signal(int sig) {
    if (!g_sweep_signal) g_sweep_signal = sig;
}

typedef struct job {
    pid_t pid;              /* 0: free slot */
    int point;
    int fd;                 /* read end of the child's report pipe */
} job;

/* In the child: run the point and write "state status message" to fd. parent: the
 * sweep's pid, read before fork. */
static void child_run(sweep *s, int i, const st_sweep_opts *opts, int fd, pid_t parent, int hup_ignored) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, hup_ignored ? SIG_IGN : SIG_DFL);   /* the training catches it again, unless nohup */
#ifdef __linux__
    /* SIGTERM, not SIGKILL: a training child saves a checkpoint first, as on a forwarded
     * SIGTERM. A parent that died before prctl took effect is seen by getppid. */
    (void)prctl(PR_SET_PDEATHSIG, SIGTERM);   /* on failure the child runs as before */
    if (getppid() != parent) _exit(130);
#else
    (void)parent;
#endif
    int rc = st_sweep_run_point(s, i, opts);
    const sweep_point *pt = &s->points[i];
    char msg[1200];
    int n = snprintf(msg, sizeof msg, "%d %d %s", pt->state, pt->status, pt->error);
    if (n > 0 && write(fd, msg, (size_t)(n < (int)sizeof msg ? n : (int)sizeof msg - 1)) < 0) rc = ST_ERR_IO;
    close(fd);
    fflush(stdout);
    fflush(stderr);
    _exit(rc == ST_ERR_INTERRUPTED ? 130 : rc ? 1 : 0);
}

/* A child ended: take its report (or make one from the exit status). */
static void job_done(sweep *s, job *j, int wstatus) {
    sweep_point *pt = &s->points[j->point];
    char msg[1200] = "";
    ssize_t n = read(j->fd, msg, sizeof msg - 1);
    close(j->fd);
    msg[n > 0 ? n : 0] = 0;
    int state = PT_FAILED, status = ST_ERR_GENERIC, off = 0;
    if (n > 0 && sscanf(msg, "%d %d %n", &state, &status, &off) >= 2) {
        pt->state = state;
        pt->status = status;
        snprintf(pt->error, sizeof pt->error, "%s", msg + off);
    } else if (WIFSIGNALED(wstatus) &&
               (WTERMSIG(wstatus) == SIGINT || WTERMSIG(wstatus) == SIGTERM || WTERMSIG(wstatus) == SIGHUP)) {
        /* stopped by the user outside training (evaluation): the next run of the sweep
         * resumes or evaluates it again */
        pt->state = PT_INCOMPLETE;
        pt->status = ST_ERR_INTERRUPTED;
        snprintf(pt->error, sizeof pt->error, "interrupted (%s); run the sweep again to resume",
                 WTERMSIG(wstatus) == SIGINT ? "SIGINT" : WTERMSIG(wstatus) == SIGHUP ? "SIGHUP" : "SIGTERM");
    } else {
        /* killed by another signal (SIGKILL: often the kernel's out-of-memory killer) or
         * ended without a report: an error of the point (exit 1), not the user's
         * interruption (130 promises a checkpoint saved on SIGINT/SIGTERM) */
        pt->state = PT_FAILED;
        pt->status = ST_ERR_GENERIC;
        if (WIFSIGNALED(wstatus))
            snprintf(pt->error, sizeof pt->error, "the run's process was killed by signal %d (%s)%s before it reported; "
                     "run the sweep again to continue it from its last checkpoint", WTERMSIG(wstatus),
                     strsignal(WTERMSIG(wstatus)), WTERMSIG(wstatus) == SIGKILL ? ", e.g. by the out-of-memory killer," : "");
        else
            snprintf(pt->error, sizeof pt->error, "the run's process ended without a report (exit %d)",
                     WEXITSTATUS(wstatus));
    }
    if ((pt->state == PT_DONE || pt->state == PT_SKIPPED) && !st_sweep_reload_point(s, j->point)) {
        pt->state = PT_FAILED;
        pt->status = ST_ERR_IO;
        snprintf(pt->error, sizeof pt->error, "finished, but its sweep_done.json cannot be read back");
    }
    j->pid = 0;
}

/* This rank's share, `jobs` child processes at a time. */
/* The first of this rank's points not handed out yet whose model is not being trained by
 * a running job: a point that differs from a running one in eval.* only waits for it (and
 * then evaluates its run) instead of training a copy side by side. -1: none can start. */
static int next_point(const sweep *s, const job *slot, int jobs, const char *handed, int rank, int ranks) {
    for (int i = rank; i < s->n_points; i += ranks) {
        if (handed[i]) continue;
        int blocked = 0;
        for (int k = 0; k < jobs && !blocked; k++)
            blocked = slot[k].pid && slot[k].point < i && st_sweep_same_model(s, i, slot[k].point);
        if (!blocked) return i;
    }
    return -1;
}

static int run_forked(sweep *s, const st_sweep_opts *opts, int rank, int ranks, int write_tables, st_error *e) {
    const int jobs = s->jobs;
    job *slot = calloc((size_t)jobs, sizeof *slot);
    if (!slot) return ST_ERR_MEMORY;
    struct sigaction sa, old_int, old_term, old_hup;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sweep_signal;
    sigemptyset(&sa.sa_mask);
    g_sweep_signal = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, NULL, &old_hup);
    const int hup_ignored = old_hup.sa_handler == SIG_IGN;   /* nohup: it stays ignored */
    if (!hup_ignored) sigaction(SIGHUP, &sa, NULL);
    char *handed = calloc((size_t)s->n_points, 1);
    if (!handed) { free(slot); return ST_ERR_MEMORY; }
    int running = 0, forwarded = 0, rc = ST_OK;
    while (1) {
        /* hand out points while a slot is free, no signal came and every job could start:
         * after a failed pipe or fork (a process or file limit) the running jobs finish and
         * the sweep ends with the error, its unstarted points pending for the next run */
        while (!g_sweep_signal && !rc && running < jobs) {
            int i = next_point(s, slot, jobs, handed, rank, ranks);
            if (i < 0) break;
            int fds[2];
            if (pipe(fds) != 0) {
                rc = st_fail(e, ST_ERR_IO, "sweep: %s: cannot start a job process: pipe: %s", s->points[i].name,
                             strerror(errno));
                break;
            }
            fflush(stdout);
            fflush(stderr);
            const pid_t parent = getpid();
            pid_t pid = fork();
            if (pid < 0) {
                rc = st_fail(e, ST_ERR_GENERIC, "sweep: %s: cannot start a job process: fork: %s", s->points[i].name,
                             strerror(errno));
                close(fds[0]);
                close(fds[1]);
                break;
            }
            handed[i] = 1;
            if (pid == 0) { close(fds[0]); child_run(s, i, opts, fds[1], parent, hup_ignored); }
            close(fds[1]);
            job *j = slot;
            while (j->pid) j++;
            *j = (job){pid, i, fds[0]};
            running++;
        }
        if (running == 0) break;
        if (g_sweep_signal == SIGTERM && !forwarded) {   /* Ctrl-C reached the children already */
            for (int k = 0; k < jobs; k++) if (slot[k].pid) kill(slot[k].pid, SIGTERM);
            forwarded = 1;
        }
        int wstatus = 0;
        pid_t pid = waitpid(-1, &wstatus, 0);
        if (pid < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int k = 0; k < jobs; k++)
            if (slot[k].pid == pid) {
                job_done(s, &slot[k], wstatus);
                running--;
                if (write_tables) {
                    st_error we = {0};
                    if (st_sweep_write_results(s, &we)) st_log(ST_LOG_ERROR, "sweep: %s", we.msg);
                }
            }
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    if (!rc && g_sweep_signal) rc = ST_ERR_INTERRUPTED;
    g_sweep_signal = 0;
    free(handed);
    free(slot);
    return rc;
}

/* This rank's share, one point after the other in this process. */
static int run_inline(sweep *s, const st_sweep_opts *opts, int rank, int ranks, int write_tables) {
    for (int i = rank; i < s->n_points; i += ranks) {
        int prc = st_sweep_run_point(s, i, opts);
        /* tables after every point, so an interrupted sweep still leaves them */
        if (write_tables) {
            st_error we = {0};
            if (st_sweep_write_results(s, &we)) st_log(ST_LOG_ERROR, "sweep: %s", we.msg);
        }
        if (prc == ST_ERR_INTERRUPTED) return prc;
    }
    return ST_OK;
}

/* Rank 0 learns every point's outcome; points of other ranks get their records from the
 * markers those ranks wrote. */
static int gather(sweep *s, st_dist *d, int rc, st_error *e) {
    const int n = s->n_points, rank = st_dist_rank(d), ranks = st_dist_size(d);
    int32_t *v = calloc((size_t)(2 * n + 1), sizeof *v);
    if (!v) return st_fail(e, ST_ERR_MEMORY, "out of memory");
    for (int i = rank; i < n; i += ranks) {
        v[2 * i] = s->points[i].state;
        v[2 * i + 1] = s->points[i].status;
    }
    v[2 * n] = rc == ST_ERR_INTERRUPTED;
    if (st_dist_max_i32(d, v, (size_t)(2 * n + 1))) { free(v); return st_fail(e, ST_ERR_GENERIC, "sweep: gather failed"); }
    for (int i = 0; rank == 0 && i < n; i++) {
        if (i % ranks == 0) continue;
        sweep_point *pt = &s->points[i];
        pt->state = v[2 * i];
        pt->status = v[2 * i + 1];
        if (pt->state == PT_FAILED)
            snprintf(pt->error, sizeof pt->error, "failed on rank %d (exit %d; its message is in that rank's output)",
                     i % ranks, pt->status);
        else if (pt->state == PT_INCOMPLETE)   /* its step and cause are in that rank's output */
            snprintf(pt->error, sizeof pt->error, "stopped on rank %d before it finished (%s); run the sweep again to "
                     "resume", i % ranks, pt->status == ST_ERR_INTERRUPTED ? "interrupted" : "train.max_seconds reached");
        else if ((pt->state == PT_DONE || pt->state == PT_SKIPPED) && !st_sweep_reload_point(s, i)) {
            pt->state = PT_FAILED;
            pt->status = ST_ERR_IO;
            snprintf(pt->error, sizeof pt->error, "finished on rank %d, but rank 0 cannot read its sweep_done.json "
                     "(the sweep's out directory must be shared by all ranks)", i % ranks);
        }
    }
    if (v[2 * n]) d->agreed = 1;
    rc = v[2 * n] ? ST_ERR_INTERRUPTED : ST_OK;
    free(v);
    if (rc) st_fail(e, rc, "sweep interrupted; run the same command again to resume");
    return rc;
}

int st_sweep_schedule(sweep *s, const st_sweep_opts *opts, st_error *e) {
    st_dist *d = opts ? opts->dist : NULL;
    const int rank = st_dist_rank(d), ranks = st_dist_size(d);
    if (s->jobs > 1 && s->threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        s->threads = cores > s->jobs ? (int)(cores / s->jobs) : 1;
    }
    if (ranks > 1 || s->jobs > 1)
        st_log(ST_LOG_INFO, "sweep: %d rank(s) x %d job(s) at a time%s", ranks, s->jobs,
               s->threads > 0 ? "" : ", threads from each run's train.threads");
    /* with one rank the tables follow every point; with several, rank 0 writes them at the end */
    const int write_tables = ranks == 1;
    int rc = s->jobs > 1 ? run_forked(s, opts, rank, ranks, write_tables, e)
                         : run_inline(s, opts, rank, ranks, write_tables);
    if (ranks == 1) {   /* a job that could not start: its message is in e, for the caller to print */
        if (rc == ST_ERR_INTERRUPTED) st_fail(e, rc, "sweep interrupted; run the same command again to resume");
        return rc;
    }
    /* point failures travel in the points (an unstarted one stays pending); this rank's own
     * error would not reach rank 0, so it is printed here */
    if (rc && rc != ST_ERR_INTERRUPTED && e) st_log(ST_LOG_ERROR, "%s", e->msg);
    if (rc != ST_ERR_INTERRUPTED) rc = ST_OK;
    return gather(s, d, rc, e);
}
