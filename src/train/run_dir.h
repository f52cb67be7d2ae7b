/* src/train/run_dir.h: what a training run writes and reads back: the output
 * directory, the trace (src/trace/trace.h) and the safetensors checkpoints
 * (src/base/safetensors.h).
 *
 * Output directory layout:
 *   config.ini          the resolved configuration (adapt_config_print)
 *   trace.jsonl         header, step, epoch, test and end records
 *   ckpt-<epoch>/       one checkpoint, written in full before it is published:
 *     model.safetensors parameters and batch-norm buffers under their PyTorch
 *                       state_dict names; metadata: format, epoch, step, seed,
 *                       model, dataset, rng, policy and unit_formats (the
 *                       per-unit number formats of the last weight rounding)
 *     optim.safetensors one momentum buffer per trainable parameter (same
 *                       names) and the policy's tensors (policy-prefixed
 *                       names); metadata: sgd steps, the schedule's state,
 *                       the policy's state as JSON
 *   checkpoint          link to the published ckpt-<epoch>; replaced by one
 *                       rename, after which the previous one is removed
 *   model.safetensors, optim.safetensors
 *                       links to checkpoint/model.safetensors and
 *                       checkpoint/optim.safetensors
 * A checkpoint is atomic as a whole: an interruption anywhere in its writing
 * (a kill, a full disk) leaves the previous one published. --resume and
 * --force remove what an interrupted write left (temporaries, unpublished
 * ckpt-* directories); --resume of a run stopped before its first checkpoint
 * starts it again. Every value read back is checked against its range and
 * the model. An existing directory is refused unless resuming (which
 * continues it) or forced (which replaces these files and nothing else).
 *
 * Non-goals: mid-epoch checkpoints; formats other than safetensors.
 */
#ifndef ADAPT_RUN_IO_H
#define ADAPT_RUN_IO_H

#include <stdio.h>

#include "src/config/config.h"
#include "src/net/net.h"
#include "src/net/optim.h"
#include "src/policy/policy.h"
#include "src/train/train.h"

#define ADAPT_RUN_PATH_MAX 1200

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

struct adapt_run_io {
    char out_dir[ADAPT_RUN_PATH_MAX];
    char trace_path[ADAPT_RUN_PATH_MAX];
    char model_path[ADAPT_RUN_PATH_MAX];
    char optim_path[ADAPT_RUN_PATH_MAX];
    struct adapt_trace_writer *tw;
    const struct adapt_config *cfg;
    const char *dataset;
};

/* Prepares the output directory and the trace. When opts->resume, loads the
 * last checkpoint into net, opt and sched, cuts the trace back to that epoch
 * and sets *start_epoch / *start_step; otherwise writes the trace header. */
enum adapt_status adapt_run_io_open(struct adapt_run_io *io, const struct adapt_config *cfg,
                                    const struct adapt_train_opts *opts, struct adapt_net *net,
                                    struct adapt_sgd *opt, struct adapt_sched *sched,
                                    struct adapt_policy *pol, const struct adapt_run_info *info,
                                    int *start_epoch, long *start_step);
/* A step record: the policy's per-unit states and events since the last one. */
enum adapt_status adapt_run_io_step(struct adapt_run_io *io, const struct adapt_policy *pol,
                                    long step, int epoch, double lr, double loss, int accum);
/* Writes the epoch record and flushes the trace. */
enum adapt_status adapt_run_io_epoch(struct adapt_run_io *io, const struct adapt_run_epoch *ep);
/* Writes and publishes the checkpoint of epochs_done (see the layout above). */
enum adapt_status adapt_run_io_checkpoint(struct adapt_run_io *io, const struct adapt_net *net,
                                          const struct adapt_sgd *opt,
                                          const struct adapt_sched *sched,
                                          const struct adapt_policy *pol, int epochs_done,
                                          long step);
enum adapt_status adapt_run_io_test(struct adapt_run_io *io, int epoch, double loss, double acc);
enum adapt_status adapt_run_io_end(struct adapt_run_io *io, const char *status, double wall_s);
void adapt_run_io_close(struct adapt_run_io *io);

/* Loads parameters and buffers by state_dict name from a safetensors file
 * (ours or PyTorch's): every tensor of the network must be present with the
 * same shape (F32; num_batches_tracked I64). */
enum adapt_status adapt_run_io_load_weights(struct adapt_net *net, const char *path);
/* The per-unit formats stored with a model.safetensors (metadata
 * "unit_formats", written by adapt_run_io_checkpoint) applied to pol's
 * precision units, and *step set to the checkpoint's optimizer step (the
 * key of its last weight rounding). Files without them (PyTorch's, or a
 * policy without precision units) leave pol unchanged and *step = 0; formats
 * of another policy are not applied. When report is not NULL, prints the
 * formats used (or why none) and a note when the policies differ. */
enum adapt_status adapt_run_io_load_formats(struct adapt_policy *pol, const char *path,
                                            long *step, FILE *report);

#endif
