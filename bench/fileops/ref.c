/* The reference for bench/file_ops.py: the same system calls tilemark's file streams make,
 * in the plainest loop (no tool has a package here: mdtest and elbencho are not in Debian).
 *
 *   ref DIR THREADS SECONDS stat N     fstatat(AT_SYMLINK_NOFOLLOW) of f%08d, 0 <= i < N, random
 *   ref DIR THREADS SECONDS cycle N    per thread: openat(O_CREAT|O_EXCL) of a new name + close +
 *                                      unlinkat of a random one of its own N/THREADS files (made
 *                                      first, untimed), as tilemark's sequence "create,close,
 *                                      delete" deletes a random existing file
 *
 * Prints one JSON line: calls per kind, wall seconds, process CPU seconds. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int dirfd_;
static long n_files;
static int mode_cycle;
static atomic_int stop;
static atomic_int ready;
static int nthreads;

struct counts { uint64_t create, close, del, stat; };

static uint64_t rnd(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }

static void *worker(void *arg) {
    struct counts *c = arg;
    uint64_t seed = (uintptr_t)arg * 2654435761u + 1;
    char name[64];
    long i = 0;
    long pool = n_files > 0 ? n_files : 1;
    long *own = calloc(pool, sizeof *own); /* the names (numbers) of this thread's files */
    for (; mode_cycle && i < pool; i++) {
        snprintf(name, sizeof name, "t%p_%ld", arg, i);
        int fd = openat(dirfd_, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) { perror("openat"); exit(1); }
        close(fd);
        own[i] = i;
    }
    atomic_fetch_add(&ready, 1);
    while (atomic_load(&ready) < nthreads) ;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        if (mode_cycle) {
            snprintf(name, sizeof name, "t%p_%ld", arg, i);
            int fd = openat(dirfd_, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
            if (fd < 0) { perror("openat"); exit(1); }
            c->create++;
            close(fd);
            c->close++;
            long j = (long)(rnd(&seed) % (uint64_t)pool);
            snprintf(name, sizeof name, "t%p_%ld", arg, own[j]);
            if (unlinkat(dirfd_, name, 0) != 0) { perror("unlinkat"); exit(1); }
            c->del++;
            own[j] = i++;
        } else {
            struct stat st;
            snprintf(name, sizeof name, "f%08ld", (long)(rnd(&seed) % (uint64_t)n_files));
            if (fstatat(dirfd_, name, &st, AT_SYMLINK_NOFOLLOW) != 0) { perror("fstatat"); exit(1); }
            c->stat++;
        }
    }
    for (long k = 0; mode_cycle && k < pool; k++) { /* leave the directory as it was */
        snprintf(name, sizeof name, "t%p_%ld", arg, own[k]);
        unlinkat(dirfd_, name, 0);
    }
    free(own);
    return NULL;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: ref DIR THREADS SECONDS stat|cycle N\n"); return 2; }
    dirfd_ = open(argv[1], O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (dirfd_ < 0) { perror(argv[1]); return 1; }
    int threads = atoi(argv[2]);
    nthreads = threads;
    double seconds = atof(argv[3]);
    mode_cycle = strcmp(argv[4], "cycle") == 0;
    n_files = atol(argv[5]);
    if (mode_cycle) n_files = n_files / threads; /* each thread's pool */
    struct counts *c = calloc(threads, sizeof *c);
    pthread_t *t = calloc(threads, sizeof *t);
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    double t0 = now();
    for (int k = 0; k < threads; k++) pthread_create(&t[k], NULL, worker, &c[k]);
    while (atomic_load(&ready) < threads) ; /* the pools are made: the timed part starts */
    getrusage(RUSAGE_SELF, &r0);
    t0 = now();
    struct timespec d = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&d, NULL);
    atomic_store(&stop, 1);
    double wall = now() - t0;
    getrusage(RUSAGE_SELF, &r1); /* before the threads remove their pools */
    for (int k = 0; k < threads; k++) pthread_join(t[k], NULL);
    double cpu = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) + (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6
               + (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) + (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
    struct counts s = {0};
    for (int k = 0; k < threads; k++) {
        s.create += c[k].create; s.close += c[k].close; s.del += c[k].del; s.stat += c[k].stat;
    }
    printf("{\"create\": %lu, \"close\": %lu, \"delete\": %lu, \"stat\": %lu, \"wall_s\": %.6f, "
           "\"cpu_s\": %.6f}\n", s.create, s.close, s.del, s.stat, wall, cpu);
    return 0;
}
