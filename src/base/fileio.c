/* src/base/fileio.c: atomic file replacement (temporary, sync, rename, sync of
 * the directory), its fault-injection hook, and clean-up of temporaries. */
#include "src/base/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
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

long adapt_utf8_invalid_at(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = u[i];
        size_t len;
        unsigned lo = 0x80, hi = 0xbf; /* the range of the second byte */
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            if (c == 0xe0) lo = 0xa0; /* overlong */
            if (c == 0xed) hi = 0x9f; /* surrogates */
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            if (c == 0xf0) lo = 0x90; /* overlong */
            if (c == 0xf4) hi = 0x8f; /* above U+10FFFF */
        } else {
            return (long)i;
        }
        if (n - i < len || u[i + 1] < lo || u[i + 1] > hi) return (long)i;
        for (size_t k = 2; k < len; k++)
            if (u[i + k] < 0x80 || u[i + k] > 0xbf) return (long)i;
        i += len;
    }
    return -1;
}

char *adapt_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int adapt_identifier_valid(const char *name, size_t max)
{
    if (!name || !((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z') ||
                   name[0] == '_'))
        return 0;
    size_t n = 1;
    for (; name[n]; n++) {
        char c = name[n];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return 0;
    }
    return n < max;
}

enum adapt_status adapt_read_text(const char *path, size_t max_bytes, char **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ADAPT_ERROR(errno == ENOENT ? ADAPT_ENOENT : ADAPT_EIO, "%s: cannot open: %s",
                           path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    enum adapt_status st = buf ? ADAPT_OK : ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
    while (!st) {
        if (n + 1 == cap) {
            char *b = cap > max_bytes ? NULL : realloc(buf, 2 * cap);
            if (!b) {
                st = cap > max_bytes
                         ? ADAPT_ERROR(ADAPT_EFORMAT, "%s: larger than %zu bytes", path, max_bytes)
                         : ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", path);
                break;
            }
            buf = b;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    if (!st && ferror(f)) st = ADAPT_ERROR(ADAPT_EIO, "%s: read error", path);
    if (!st && n > max_bytes)
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: larger than %zu bytes", path, max_bytes);
    if (!st && memchr(buf, 0, n))
        st = ADAPT_ERROR(ADAPT_EFORMAT, "%s: contains a NUL byte (a text file expected)", path);
    fclose(f);
    if (st) {
        free(buf);
        return st;
    }
    buf[n] = 0;
    *out = buf;
    return ADAPT_OK;
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

/* Where adapt_find_file looks after ADAPT_DATA_PATH: the source tree and the installed data
 * folder, set by the build (Makefile.am); empty when a build did not say. */
#ifndef ADAPT_ABS_SRCDIR
#define ADAPT_ABS_SRCDIR ""
#endif
#ifndef ADAPT_PKGDATADIR
#define ADAPT_PKGDATADIR ""
#endif

/* Appends s to the list of places looked (kept short: the message buffer is bounded). */
static void tried_add(char *tried, size_t cap, const char *s)
{
    size_t n = strlen(tried);
    if (n + 2 >= cap) return;
    snprintf(tried + n, cap - n, "%s%s", n ? ", " : "", s);
}

enum adapt_status adapt_find_file(const char *name, const char *what, const char *const *subs,
                                  char **out)
{
    *out = NULL;
    struct stat sb;
    int explicit = name[0] == '/' || !strncmp(name, "./", 2) || !strncmp(name, "../", 3);
    if (explicit || stat(name, &sb) == 0) {
        if (!(*out = adapt_strdup(name)))
            return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", name);
        return ADAPT_OK;
    }
    char tried[768] = "";
    tried_add(tried, sizeof tried, "the current directory");
    const char *env = getenv("ADAPT_DATA_PATH");
    char *list = adapt_strdup(env ? env : "");
    if (!list) return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", name);
    const char *fixed[2] = {ADAPT_ABS_SRCDIR, ADAPT_PKGDATADIR};
    char *save = NULL, *base = strtok_r(list, ":", &save);
    for (int k = 0; base || k < 2; base = base ? strtok_r(NULL, ":", &save) : NULL) {
        const char *b = base;
        if (!b) b = fixed[k++];
        if (!b[0]) continue;
        for (const char *const *sub = subs; *sub; sub++) {
            char *dir = (*sub)[0] ? adapt_path_join(b, *sub) : adapt_strdup(b);
            char *p = dir ? adapt_path_join(dir, name) : NULL;
            if (!p) {
                free(dir);
                free(list);
                return ADAPT_ERROR(ADAPT_ENOMEM, "%s: out of memory", name);
            }
            if (stat(p, &sb) == 0) {
                free(dir);
                free(list);
                *out = p;
                return ADAPT_OK;
            }
            tried_add(tried, sizeof tried, dir);
            free(dir);
            free(p);
        }
    }
    free(list);
    return ADAPT_ERROR(ADAPT_ENOENT, "%s: no such %s (looked in %s; ADAPT_DATA_PATH adds folders)",
                       name, what, tried);
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
        /* the path asked for: its temporary fails for the same reasons (no folder, no
         * permission), and its name means nothing to the reader */
        enum adapt_status st = ADAPT_ERROR(ADAPT_EIO, "cannot create %s: %s", path,
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

/* The process id of a temporary's name ("*.tmp.<pid>"), or -1 when name is none. */
static long tmp_name_pid(const char *name)
{
    const char *t = strstr(name, ".tmp.");
    if (!t) return -1;
    const char *last;
    do { /* the last ".tmp." */
        last = t;
        t = strstr(t + 1, ".tmp.");
    } while (t);
    const char *d = last + 5;
    if (!*d) return -1;
    long pid = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9') return -1;
        pid = pid < 100000000 ? pid * 10 + (*d - '0') : 100000000;
    }
    return pid;
}

int adapt_fileio_is_tmp_name(const char *name) { return tmp_name_pid(name) >= 0; }

int adapt_process_alive(long pid)
{
    return pid > 0 && (pid_t)pid == pid && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
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
        long pid = tmp_name_pid(e->d_name);
        if (pid < 0) continue;
        /* another live process's write in progress (a picture or a report written into a run
         * directory) is its own */
        if (pid != (long)getpid() && pid < 100000000 && adapt_process_alive(pid)) continue;
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
