/* SPDX-License-Identifier: MIT */
/*
 * The script of tuna's HTML page (report.js: sortable command table,
 * timeline zoom / pan / focus, hover details, the view in the URL
 * fragment), embedded in the binary so that the page stays one
 * self-contained file. The Makefile makes this object depend on report.js.
 */
#include "report.h"

__asm__(".section .rodata\n"
        ".global tuna_report_js\n"
        ".type tuna_report_js, @object\n"
        "tuna_report_js:\n"
        ".incbin \"tools/tuna/report.js\"\n"
        ".byte 0\n"
        ".size tuna_report_js, . - tuna_report_js\n"
        ".previous\n");
