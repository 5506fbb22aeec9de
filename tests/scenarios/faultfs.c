/* A disk that fills up, for the fault-injection tests: preloaded beside the shim, it
   interposes the calls that write files and acts on those in one directory.
     FAULTFS_DIR    the directory (its files, by their path)
     FAULTFS_SPACE  bytes that fit in it, all writes of the process together; a write past
                    them writes what fits and fails with ENOSPC, as a full disk does
     FAULTFS_LOG    a file to which each rename or link into the directory adds a line,
                    "rename NAME" or "link NAME": how many times a report was replaced
   Calls go to the kernel directly (syscall(2)): the shim interposes dlsym. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static long long used;

static const char *dir(void) {
    const char *d = getenv("FAULTFS_DIR");
    return d && *d ? d : NULL;
}

static int inside(const char *path) {
    const char *d = dir();
    size_t n = d ? strlen(d) : 0;
    return d && strncmp(path, d, n) == 0 && path[n] == '/';
}

static int fd_inside(int fd) {
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    return inside(path);
}

static void note(const char *what, const char *path) {
    const char *log = getenv("FAULTFS_LOG");
    if (!log || !inside(path)) return;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    char line[4200];
    const char *name = strrchr(path, '/') + 1;
    int len = snprintf(line, sizeof line, "%s %s\n", what, name);
    syscall(SYS_write, fd, line, (size_t)len);
    close(fd);
}

ssize_t write(int fd, const void *buf, size_t count) {
    const char *space = getenv("FAULTFS_SPACE");
    if (space && fd > 2 && fd_inside(fd)) {
        long long left = atoll(space) - used;
        if (left <= 0) {
            errno = ENOSPC;
            return -1;
        }
        if ((long long)count > left) count = (size_t)left;
        used += (long long)count;
    }
    return syscall(SYS_write, fd, buf, count);
}

int rename(const char *from, const char *to) {
    note("rename", to);
    return (int)syscall(SYS_renameat, AT_FDCWD, from, AT_FDCWD, to);
}

int link(const char *from, const char *to) {
    note("link", to);
    return (int)syscall(SYS_linkat, AT_FDCWD, from, AT_FDCWD, to, 0);
}

int linkat(int fromdir, const char *from, int todir, const char *to, int flags) {
    note("link", to);
    return (int)syscall(SYS_linkat, fromdir, from, todir, to, flags);
}
