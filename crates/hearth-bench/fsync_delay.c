/* LD_PRELOAD shim for the load driver: adds HEARTH_FSYNC_DELAY_US microseconds to
 * every fsync/fdatasync of the process, to emulate a slow disk. Benchmark only. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

static void delay(void) {
    const char *v = getenv("HEARTH_FSYNC_DELAY_US");
    if (v) usleep((useconds_t)atoi(v));
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    delay();
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    delay();
    return real(fd);
}
