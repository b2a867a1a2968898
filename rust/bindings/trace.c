// SPDX-License-Identifier: GPL-2.0
/*
 * Defines oxe's trace events (oxe_trace.h) and, for each, the function
 * Rust calls to emit it (rust_do_trace_<event>), which the kernel's
 * tracepoint headers generate.
 */
#define CREATE_TRACE_POINTS
#define CREATE_RUST_TRACE_POINTS
#include "oxe_trace.h"
