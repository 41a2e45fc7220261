/* dist_internal.h - the transports of src/dist (not public API). */
#ifndef ST_DIST_INTERNAL_H
#define ST_DIST_INTERNAL_H

#include "st_dist.h"

/* none.c: one process */
extern const st_dist_ops st_dist_none_ops;

/* mpi.c (built with STRETCH_MPI only): MPI_Init_thread, rank and size into d. */
int st_dist_mpi_open(st_dist *d, int *argc, char ***argv, st_error *e);

#endif
