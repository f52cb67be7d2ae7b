/* src/train/run_dir.h: the output directory of a training run and what it
 * writes as it goes: the resolved configuration and the trace
 * (src/trace/trace.h). Checkpoints in the same directory are
 * src/train/checkpoint.h's.
 *
 * Output directory layout:
 *   config.ini          the resolved configuration (adapt_config_print)
 *   trace.jsonl         header, step, epoch, test and end records
 *   ckpt-<epoch>/, checkpoint, model.safetensors, optim.safetensors
 *                       the published checkpoint and the links to it
 *                       (src/train/checkpoint.h)
 *   .adapt-lock         the lock: one process at a time owns the directory
 * An existing directory is refused unless resuming (which continues it) or
 * forced (which replaces these files and nothing else). --resume and --force
 * remove what an interrupted write left (temporaries, unpublished ckpt-*
 * directories); --resume of a run stopped before its first checkpoint starts
 * it again.
 *
 * One process per directory: adapt_run_dir_claim takes an advisory lock
 * (flock(2), exclusive) on .adapt-lock before it reads, cleans or writes
 * anything there, and adapt_run_dir_close releases it. A directory whose lock
 * another live process holds is refused with that process's id, whatever the
 * options; the kernel drops the lock of a process that ends, however it ends,
 * so a killed run leaves no obstacle. The lock file itself is never removed
 * (removing it would let two processes lock two different files).
 *
 *   struct adapt_run_dir d;
 *   struct adapt_run_dir_opts o = {"runs/x", 0, 0};
 *   st = adapt_run_dir_claim(&d, &o);      (before the data and the model load)
 *   st = adapt_run_dir_open(&d, cfg, &o, net, &opt, &sched, pol, &info, &epoch0, &step0);
 *   ... adapt_run_dir_step(&d, pol, ...); adapt_run_dir_epoch(&d, &ep);
 *   adapt_run_dir_test(&d, epoch, loss, acc); adapt_run_dir_end(&d, "ok", wall);
 *   adapt_run_dir_close(&d);
 *
 * Ownership: struct adapt_run_dir borrows cfg and the dataset name and owns
 * the trace writer (adapt_run_dir_close frees it).
 *
 * Non-goals: formats other than the JSON-lines trace and INI.
 */
#ifndef ADAPT_RUN_DIR_H
#define ADAPT_RUN_DIR_H

#include <stddef.h>

#include "src/config/config.h"
#include "src/net/net.h"
#include "src/net/optim.h"
#include "src/policy/policy.h"

#define ADAPT_RUN_PATH_MAX 1200

/* Where the run goes and how an existing directory is treated. */
struct adapt_run_dir_opts {
    const char *out_dir; /* resolved output directory */
    int resume;          /* continue the run in out_dir */
    int force;           /* overwrite an existing out_dir */
};

struct adapt_run_info {
    const char *dataset;
    int n_train_total, n_train, n_val, n_test;
};

struct adapt_run_epoch {
    int epoch; /* 0-based */
    long step; /* optimizer steps so far */
    double lr, train_loss, train_acc, val_loss, val_acc, wall_s, images_per_s;
};

struct adapt_trace_writer;

struct adapt_run_dir {
    char out_dir[ADAPT_RUN_PATH_MAX];
    char trace_path[ADAPT_RUN_PATH_MAX];
    char model_path[ADAPT_RUN_PATH_MAX]; /* the model.safetensors link */
    char optim_path[ADAPT_RUN_PATH_MAX]; /* the optim.safetensors link */
    struct adapt_trace_writer *tw;
    const struct adapt_config *cfg;
    const char *dataset;
    int lock_fd; /* the open .adapt-lock, held; meaningful while locked */
    int locked;
};

/* buf = dir/file; ADAPT_ERANGE when it does not fit in n bytes. */
enum adapt_status adapt_run_dir_join(char *buf, size_t n, const char *dir, const char *file);

/* Claims the output directory for this process: refuses a path that is not a
 * directory, --resume of a directory without a run, and (without --resume or
 * --force) a directory that holds a run; takes the lock of an existing
 * directory, refusing one that another process holds (ADAPT_EEXIST, naming
 * its process id). Reads, cleans and writes nothing in it but the lock file,
 * and creates nothing: a directory that does not exist yet is created and
 * locked by adapt_run_dir_open, with the same checks. d is set up afresh;
 * adapt_run_dir_close releases the lock. */
enum adapt_status adapt_run_dir_claim(struct adapt_run_dir *d,
                                      const struct adapt_run_dir_opts *opts);

/* On a claimed directory: prepares the output directory and the trace. When opts->resume, loads the
 * last checkpoint into net, opt, sched and pol (adapt_ckpt_resume), cuts the
 * trace back to that epoch and sets *start_epoch / *start_step; otherwise
 * writes config.ini and the trace header. */
enum adapt_status adapt_run_dir_open(struct adapt_run_dir *d, const struct adapt_config *cfg,
                                     const struct adapt_run_dir_opts *opts, struct adapt_net *net,
                                     struct adapt_sgd *opt, struct adapt_sched *sched,
                                     struct adapt_policy *pol, const struct adapt_run_info *info,
                                     int *start_epoch, long *start_step);
/* Refuses what the run directory could not record (a trace header field that is not UTF-8),
 * so that a run stops before it writes anything, and a dry run says so. */
enum adapt_status adapt_run_dir_check(const struct adapt_config *cfg, const struct adapt_net *net,
                                      const struct adapt_policy *pol,
                                      const struct adapt_run_info *info);
/* A step record: the policy's per-unit states and events since the last one. */
enum adapt_status adapt_run_dir_step(struct adapt_run_dir *d, const struct adapt_policy *pol,
                                     long step, int epoch, double lr, double loss, int accum);
/* Writes the epoch record and flushes the trace. */
enum adapt_status adapt_run_dir_epoch(struct adapt_run_dir *d, const struct adapt_run_epoch *ep);
enum adapt_status adapt_run_dir_test(struct adapt_run_dir *d, int epoch, double loss, double acc);
/* Writes a comp search record (after the header, before the first step) and flushes. */
enum adapt_status adapt_run_dir_sample(struct adapt_run_dir *d, const struct adapt_trace_sample *s);
/* The end record ("ok" or "stopped"), flushed. */
enum adapt_status adapt_run_dir_end(struct adapt_run_dir *d, const char *status, double wall_s);
/* Closes the trace and releases the directory's lock; safe on a zeroed or
 * already closed struct. */
void adapt_run_dir_close(struct adapt_run_dir *d);

#endif
