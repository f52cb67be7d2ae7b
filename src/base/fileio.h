/* src/base/fileio.h: atomic file replacement, path joining and the clean-up of
 * what an interrupted write leaves behind.
 *
 * Every file adapt-sim writes whole (configuration, checkpoints, trace
 * surgery, reports, pictures) goes through adapt_atomic_*: the bytes go to
 * "<path>.tmp.<pid>", are flushed and synced, and the temporary is renamed over
 * <path>, after which the directory is synced. A reader sees the old file or
 * the new one, never a mixture; a failure (a full disk included) removes the
 * temporary and leaves the old file as it was.
 *
 *   struct adapt_atomic a;
 *   if ((st = adapt_atomic_open(&a, path))) return st;
 *   fprintf(a.f, ...);
 *   return adapt_atomic_commit(&a);      (or adapt_atomic_abort(&a) to give up)
 *
 * Fault injection: a hook (adapt_fileio_set_hook), set only by tests, is called
 * at each step of every write (enum adapt_fileio_step). It may stop the process
 * there, or return non-zero to make that step fail as a full disk would.
 *
 * Non-goals: Windows; locking between concurrent writers of one path.
 */
#ifndef ADAPT_BASE_FILEIO_H
#define ADAPT_BASE_FILEIO_H

#include <stdio.h>

#include "src/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct adapt_atomic {
    FILE *f;   /* open on the temporary; write here */
    char *path; /* owned copies */
    char *tmp;
};

/* Creates the temporary for path and opens a.f on it. */
enum adapt_status adapt_atomic_open(struct adapt_atomic *a, const char *path);
/* Flushes, syncs and closes the temporary, renames it over the path and syncs
 * the directory. Releases a in every case; on failure the temporary is gone. */
enum adapt_status adapt_atomic_commit(struct adapt_atomic *a);
/* Closes and removes the temporary; the path keeps its old content. */
void adapt_atomic_abort(struct adapt_atomic *a);

/* Points linkpath at target (a relative name), replacing an existing link in
 * one rename; the directory is synced. */
enum adapt_status adapt_atomic_symlink(const char *target, const char *linkpath);

/* Syncs a directory (its entries: created, renamed and removed names). */
enum adapt_status adapt_fileio_sync_dir(const char *dir);
/* 1 when a process of that id is alive (this machine; one of another user counts too). */
int adapt_process_alive(long pid);
/* Whether a file name is one of adapt_atomic's temporaries ("*.tmp.<digits>"). */
int adapt_fileio_is_tmp_name(const char *name);
/* Removes the temporaries an interrupted write left in dir; *n_removed (may
 * be NULL) counts them. A temporary whose process (the pid in its name) is alive
 * and not this one is another program's write in progress, and is left alone. */
enum adapt_status adapt_fileio_remove_tmp(const char *dir, int *n_removed);
/* rm -r of a directory of regular files and links (no deeper folders); a
 * file that is not a directory is removed too. */
enum adapt_status adapt_fileio_remove_dir(const char *dir);

/* "dir/name" in a new allocation (free it); NULL when out of memory. */
char *adapt_path_join(const char *dir, const char *name);
/* strdup that is in C11; NULL when out of memory. */
char *adapt_strdup(const char *s);
/* The offset of the first byte of s[0, n) that does not belong to well-formed UTF-8 (RFC 3629:
 * no overlong forms, no surrogates, nothing above U+10FFFF, no sequence cut short), or -1 when
 * all of it is UTF-8. Text that goes into a trace or a checkpoint (JSON) must pass. */
long adapt_utf8_invalid_at(const char *s, size_t n);
/* 1 when name is an identifier, [A-Za-z_][A-Za-z0-9_]*, of fewer than max bytes (NUL
 * included: at most max - 1 characters); 0 otherwise, and for NULL. */
int adapt_identifier_valid(const char *name, size_t max);
/* The whole of a text file of at most max_bytes, NUL-terminated, in a new allocation (free
 * it). Errors name the file: ADAPT_ENOENT / ADAPT_EIO when it cannot be read, ADAPT_EFORMAT
 * when it is larger than max_bytes or holds a NUL byte. */
enum adapt_status adapt_read_text(const char *path, size_t max_bytes, char **out);

/* The shipped file a user names (a configuration, a timing table): `name` itself when it
 * exists, is absolute, or starts with "./" or "../"; otherwise the first existing BASE/SUB/name
 * for BASE in the directories of the environment variable ADAPT_DATA_PATH (colon-separated),
 * the source tree the program was built from and the installed data folder
 * (PREFIX/share/adapt-sim), and SUB in `subs` (NULL-terminated, "" for BASE/name). Sets *out
 * to a new allocation (free it). When nothing exists: ADAPT_ENOENT with a message that names
 * `what` and every place looked. */
enum adapt_status adapt_find_file(const char *name, const char *what, const char *const *subs,
                                  char **out);

/* The steps of a write, in order, as the hook sees them. */
enum adapt_fileio_step {
    ADAPT_FILEIO_CREATED,    /* temporary created, empty */
    ADAPT_FILEIO_WRITTEN,    /* content written, not yet synced */
    ADAPT_FILEIO_SYNCED,     /* temporary synced and closed */
    ADAPT_FILEIO_RENAMED,    /* renamed over the path, directory not yet synced */
    ADAPT_FILEIO_DIR_SYNCED, /* directory synced: the write is durable */
    ADAPT_FILEIO_REMOVED     /* a file removed by adapt_fileio_remove_dir */
};
/* Returns 0 to go on, non-zero to fail the step (as ENOSPC). */
typedef int (*adapt_fileio_hook)(enum adapt_fileio_step step, const char *path, void *ctx);
/* Installs (or with NULL removes) the hook of this process. For tests. */
void adapt_fileio_set_hook(adapt_fileio_hook hook, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
