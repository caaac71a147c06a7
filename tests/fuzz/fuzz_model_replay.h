/* SPDX-License-Identifier: MIT */
/*
 * main() of the replay builds (-DTX_FUZZ_STANDALONE) of the model-format
 * fuzz targets (fuzz_safetensors.c, fuzz_smd.c, fuzz_onnx.c): runs
 * LLVMFuzzerTestOneInput on every file named on the command line and on
 * every file of every directory named. Define FUZZ_NAME before including.
 */
#ifndef FUZZ_MODEL_REPLAY_H
#define FUZZ_MODEL_REPLAY_H
#include <dirent.h>
#include <sys/stat.h>

static int fuzz_replay_file(const char *p)
{
    FILE *f = fopen(p, "rb");
    if (!f) {
        perror(p);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    size_t got = b ? fread(b, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!b || got != (size_t)n) {
        free(b);
        return 1;
    }
    LLVMFuzzerTestOneInput(b, (size_t)n);
    free(b);
    return 0;
}

int main(int argc, char **argv)
{
    int bad = 0, count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            while (d && (e = readdir(d))) {
                if (e->d_name[0] == '.')
                    continue;
                char p[4096];
                snprintf(p, sizeof(p), "%s/%s", argv[i], e->d_name);
                bad |= fuzz_replay_file(p);
                count++;
            }
            if (d)
                closedir(d);
        } else {
            bad |= fuzz_replay_file(argv[i]);
            count++;
        }
    }
    fprintf(stderr, "%s: %d inputs replayed\n", FUZZ_NAME, count);
    return bad;
}
#endif
