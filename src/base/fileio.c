/* src/base/fileio.c: atomic file replacement (temporary, sync, rename, sync of
 * the directory), its fault-injection hook, and clean-up of temporaries. */
#include "src/base/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static adapt_fileio_hook fault_hook;
static void *fault_ctx;

void adapt_fileio_set_hook(adapt_fileio_hook hook, void *ctx)
{
    fault_hook = hook;
    fault_ctx = ctx;
}

/* Non-zero (with errno = ENOSPC) when the hook fails this step. */
static int hook(enum adapt_fileio_step step, const char *path)
{
    if (fault_hook && fault_hook(step, path, fault_ctx)) {
        errno = ENOSPC;
        return 1;
    }
    return 0;
}

char *adapt_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

char *adapt_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* "<path>.tmp.<pid>" */
static char *tmp_name(const char *path)
{
    size_t n = strlen(path) + 32;
    char *t = malloc(n);
    if (t) snprintf(t, n, "%s.tmp.%ld", path, (long)getpid());
    return t;
}

/* The directory part of path ("." when none), in a new allocation. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return adapt_strdup(".");
    if (slash == path) return adapt_strdup("/");
    size_t n = (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = '\0';
    }
    return d;
}

enum adapt_status adapt_fileio_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return ADAPT_ERROR(ADAPT_EIO, "%s: cannot open the directory: %s", dir,
                                   strerror(errno));
    int bad = fsync(fd) != 0 && errno != EINVAL && errno != EROFS;
    int err = errno;
    close(fd);
    if (bad) return ADAPT_ERROR(ADAPT_EIO, "%s: cannot sync the directory: %s", dir, strerror(err));
    return ADAPT_OK;
}

static enum adapt_status sync_dir_of(const char *path)
{
    char *d = dir_of(path);
    if (!d) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
    enum adapt_status st = adapt_fileio_sync_dir(d);
    free(d);
    return st;
}

static void release(struct adapt_atomic *a)
{
    free(a->path);
    free(a->tmp);
    a->path = a->tmp = NULL;
    a->f = NULL;
}

enum adapt_status adapt_atomic_open(struct adapt_atomic *a, const char *path)
{
    a->f = NULL;
    a->path = adapt_strdup(path);
    a->tmp = tmp_name(path);
    if (!a->path || !a->tmp) {
        release(a);
        return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
    }
    int fd = open(a->tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        enum adapt_status st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot create %s: %s", path, a->tmp,
                                           strerror(errno));
        release(a);
        return st;
    }
    if (!(a->f = fdopen(fd, "wb"))) {
        close(fd);
        unlink(a->tmp);
        release(a);
        return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
    }
    if (hook(ADAPT_FILEIO_CREATED, path)) {
        enum adapt_status st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot write %s: %s", path, a->tmp,
                                           strerror(errno));
        adapt_atomic_abort(a);
        return st;
    }
    return ADAPT_OK;
}

void adapt_atomic_abort(struct adapt_atomic *a)
{
    if (a->f) fclose(a->f);
    if (a->tmp) unlink(a->tmp);
    release(a);
}

enum adapt_status adapt_atomic_commit(struct adapt_atomic *a)
{
    enum adapt_status st = ADAPT_OK;
    const char *what = "write";
    int err = 0;
    if (fflush(a->f) != 0 || ferror(a->f) || hook(ADAPT_FILEIO_WRITTEN, a->path)) {
        err = errno;
    } else if (fsync(fileno(a->f)) != 0 && errno != EINVAL && errno != EROFS) {
        err = errno;
        what = "sync";
    }
    int cl = fclose(a->f);
    a->f = NULL;
    if (!err && cl != 0) err = errno;
    if (!err && hook(ADAPT_FILEIO_SYNCED, a->path)) err = errno;
    if (err) {
        st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot %s %s: %s", a->path, what, a->tmp,
                         strerror(err ? err : EIO));
        goto remove_tmp;
    }
    if (rename(a->tmp, a->path) != 0) {
        st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot rename %s to it: %s", a->path, a->tmp,
                         strerror(errno));
        goto remove_tmp;
    }
    if (hook(ADAPT_FILEIO_RENAMED, a->path)) {
        st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot sync its directory: %s", a->path,
                         strerror(errno));
        release(a);
        return st;
    }
    st = sync_dir_of(a->path);
    if (st == ADAPT_OK && hook(ADAPT_FILEIO_DIR_SYNCED, a->path))
        st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot sync its directory: %s", a->path,
                         strerror(errno));
    release(a);
    return st;
remove_tmp:
    unlink(a->tmp);
    release(a);
    return st;
}

enum adapt_status adapt_atomic_symlink(const char *target, const char *linkpath)
{
    char *tmp = tmp_name(linkpath);
    if (!tmp) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", linkpath);
    enum adapt_status st = ADAPT_OK;
    unlink(tmp);
    if (symlink(target, tmp) != 0) {
        st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot create the link %s: %s", linkpath, tmp,
                         strerror(errno));
        goto free_tmp;
    }
    if (hook(ADAPT_FILEIO_CREATED, linkpath)) {
        st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot create the link %s: %s", linkpath, tmp,
                         strerror(errno));
        unlink(tmp);
        goto free_tmp;
    }
    if (rename(tmp, linkpath) != 0) {
        st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot rename %s to it: %s", linkpath, tmp,
                         strerror(errno));
        unlink(tmp);
        goto free_tmp;
    }
    if (hook(ADAPT_FILEIO_RENAMED, linkpath)) {
        st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot sync its directory: %s", linkpath,
                         strerror(errno));
        goto free_tmp;
    }
    st = sync_dir_of(linkpath);
    if (st == ADAPT_OK && hook(ADAPT_FILEIO_DIR_SYNCED, linkpath))
        st = ADAPT_ERROR(ADAPT_EIO, "%s: cannot sync its directory: %s", linkpath,
                         strerror(errno));
free_tmp:
    free(tmp);
    return st;
}

int adapt_fileio_is_tmp_name(const char *name)
{
    const char *t = strstr(name, ".tmp.");
    if (!t) return 0;
    const char *last;
    do { /* the last ".tmp." */
        last = t;
        t = strstr(t + 1, ".tmp.");
    } while (t);
    const char *d = last + 5;
    if (!*d) return 0;
    for (; *d; d++)
        if (*d < '0' || *d > '9') return 0;
    return 1;
}

enum adapt_status adapt_fileio_remove_tmp(const char *dir, int *n_removed)
{
    if (n_removed) *n_removed = 0;
    DIR *d = opendir(dir);
    if (!d) return ADAPT_ERROR(ADAPT_EIO, "%s: cannot list the directory: %s", dir,
                               strerror(errno));
    enum adapt_status st = ADAPT_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!adapt_fileio_is_tmp_name(e->d_name)) continue;
        char *p = adapt_path_join(dir, e->d_name);
        if (!p) {
            st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", dir);
            break;
        }
        if (unlink(p) != 0 && errno != ENOENT) {
            st = ADAPT_ERROR(ADAPT_EIO, "cannot remove the leftover %s: %s", p, strerror(errno));
            free(p);
            break;
        }
        if (n_removed) (*n_removed)++;
        free(p);
    }
    closedir(d);
    return st;
}

enum adapt_status adapt_fileio_remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d && errno == ENOTDIR && unlink(dir) == 0) return ADAPT_OK;
    if (!d) {
        if (errno == ENOENT) return ADAPT_OK;
        return ADAPT_ERROR(ADAPT_EIO, "%s: cannot list the directory: %s", dir, strerror(errno));
    }
    enum adapt_status st = ADAPT_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = adapt_path_join(dir, e->d_name);
        if (!p) {
            st = ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", dir);
            break;
        }
        int bad = unlink(p) != 0 && errno != ENOENT;
        if (bad) st = ADAPT_ERROR(ADAPT_EIO, "cannot remove %s: %s", p, strerror(errno));
        else if (hook(ADAPT_FILEIO_REMOVED, p))
            st = ADAPT_ERROR(ADAPT_EIO, "cannot remove %s: %s", p, strerror(errno));
        free(p);
        if (st) break;
    }
    closedir(d);
    if (st == ADAPT_OK && rmdir(dir) != 0 && errno != ENOENT)
        st = ADAPT_ERROR(ADAPT_EIO, "cannot remove the directory %s: %s", dir, strerror(errno));
    return st;
}
