/* SPDX-License-Identifier: MIT */
/*
 * tuna: its modes (docs/tuna.md), one file each: record.c, report.c,
 * overhead.c; main.c picks one.
 */
#ifndef TUNA_H
#define TUNA_H

#include <stdio.h>

/* The usage lines of every mode. */
void tuna_usage(FILE *f);

/* The modes: argv[0] is the mode's name; an exit status (2: usage). */
int tuna_record(int argc, char **argv);
int tuna_report(int argc, char **argv);
int tuna_overhead(int argc, char **argv);

#endif /* TUNA_H */
