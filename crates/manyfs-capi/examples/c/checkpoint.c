/*
 * checkpoint: four threads write their own 4 KiB blocks of one shared file
 * through libmanyfs, the file is synced, the pool remounted and every block
 * checked. Exit status 0 only when everything verified.
 *
 *   cargo build --release -p manyfs-capi
 *   cc -O2 -Icrates/manyfs-capi/include crates/manyfs-capi/examples/c/checkpoint.c \
 *      target/release/libmanyfs.a -lpthread -ldl -lm -o checkpoint
 *   ./checkpoint [DIR]     # the pool goes in DIR (default: a new directory in /tmp)
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "manyfs.h"

#define THREADS 4
#define BLOCKS_PER_THREAD 16
#define BLOCK 4096
#define POOL_BYTES (64ull << 20)

/* Report a failed call (its -errno and the library's message) and exit. */
static void check(int64_t rc, const char *what) {
    if (rc >= 0)
        return;
    char msg[256];
    manyfs_last_error(msg, sizeof msg);
    fprintf(stderr, "checkpoint: %s failed: %s (%s)\n", what, strerror((int)-rc), msg);
    exit(1);
}

/* Block b holds its number in its first 8 bytes and (b % 251) + 1 after. */
static void fill(unsigned char *buf, uint64_t b) {
    memset(buf, (int)(b % 251) + 1, BLOCK);
    memcpy(buf, &b, sizeof b);
}

struct writer {
    const struct manyfs_file *file;
    int thread;
};

/* Thread t writes blocks t, t + THREADS, t + 2 * THREADS, ... */
static void *write_blocks(void *arg) {
    const struct writer *w = arg;
    unsigned char buf[BLOCK];
    for (int i = 0; i < BLOCKS_PER_THREAD; i++) {
        uint64_t b = (uint64_t)i * THREADS + (uint64_t)w->thread;
        fill(buf, b);
        int64_t n = manyfs_pwrite(w->file, buf, BLOCK, (int64_t)(b * BLOCK));
        if (n != BLOCK)
            check(n < 0 ? n : -5 /* EIO: short write */, "manyfs_pwrite");
    }
    return NULL;
}

static int print_entry(void *ctx, const char *name, uint64_t ino, uint8_t type) {
    (void)ino;
    int *count = ctx;
    (*count)++;
    printf("readdir /: %s (%s)\n", name, type == MANYFS_DT_REG ? "file" : "other");
    return 0;
}

int main(int argc, char **argv) {
    char dir[4096];
    if (argc > 1) {
        snprintf(dir, sizeof dir, "%s", argv[1]);
    } else {
        snprintf(dir, sizeof dir, "/tmp/manyfs-checkpoint-XXXXXX");
        if (!mkdtemp(dir)) {
            perror("checkpoint: mkdtemp");
            return 1;
        }
    }
    char pool[4200];
    snprintf(pool, sizeof pool, "%s/pool", dir);

    struct manyfs_options opts = {.size = sizeof opts, .replace_existing = 1};
    check(manyfs_mkfs(pool, POOL_BYTES, &opts), "manyfs_mkfs");
    printf("mkfs: %llu MiB pool\n", POOL_BYTES >> 20);

    struct manyfs_fs *fs;
    check(manyfs_mount(pool, &opts, &fs), "manyfs_mount");
    struct manyfs_file *file;
    check(manyfs_open(fs, "/checkpoint", O_RDWR | O_CREAT | O_EXCL, 0644, &file), "manyfs_open");

    pthread_t threads[THREADS];
    struct writer writers[THREADS];
    for (int t = 0; t < THREADS; t++) {
        writers[t] = (struct writer){file, t};
        if (pthread_create(&threads[t], NULL, write_blocks, &writers[t]) != 0) {
            fprintf(stderr, "checkpoint: pthread_create failed\n");
            return 1;
        }
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    printf("wrote: %d threads x %d blocks of %d bytes\n", THREADS, BLOCKS_PER_THREAD, BLOCK);

    check(manyfs_fsync(file), "manyfs_fsync");
    check(manyfs_close(file), "manyfs_close");
    check(manyfs_unmount(fs), "manyfs_unmount");
    printf("synced and unmounted\n");

    check(manyfs_mount(pool, &opts, &fs), "manyfs_mount (again)");
    check(manyfs_open(fs, "/checkpoint", O_RDONLY, 0, &file), "manyfs_open (again)");
    struct manyfs_stat st;
    check(manyfs_fstat(file, &st), "manyfs_fstat");
    const uint64_t blocks = (uint64_t)THREADS * BLOCKS_PER_THREAD;
    if (st.size != blocks * BLOCK) {
        fprintf(stderr, "checkpoint: size %llu, expected %llu\n", (unsigned long long)st.size,
                (unsigned long long)(blocks * BLOCK));
        return 1;
    }
    unsigned char got[BLOCK], want[BLOCK];
    for (uint64_t b = 0; b < blocks; b++) {
        /* Sequential reads: the handle's offset walks the file. */
        int64_t n = manyfs_read(file, got, BLOCK);
        check(n, "manyfs_read");
        fill(want, b);
        if (n != BLOCK || memcmp(got, want, BLOCK) != 0) {
            fprintf(stderr, "checkpoint: block %llu differs after remount\n", (unsigned long long)b);
            return 1;
        }
    }
    printf("verified: %llu blocks after remount\n", (unsigned long long)blocks);
    check(manyfs_close(file), "manyfs_close");

    int entries = 0;
    check(manyfs_readdir(fs, "/", print_entry, &entries), "manyfs_readdir");
    check(manyfs_unlink(fs, "/checkpoint"), "manyfs_unlink");
    int after = 0;
    check(manyfs_readdir(fs, "/", print_entry, &after), "manyfs_readdir");
    if (entries != 1 || after != 0) {
        fprintf(stderr, "checkpoint: %d entries before unlink, %d after\n", entries, after);
        return 1;
    }
    printf("unlinked: /checkpoint\n");
    check(manyfs_unmount(fs), "manyfs_unmount");

    unlink(pool);
    if (argc <= 1)
        rmdir(dir);
    printf("checkpoint: OK\n");
    return 0;
}
