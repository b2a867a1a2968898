/* SPDX-License-Identifier: GPL-2.0 */
/*
 * oxe's trace events (trace system "oxe"): what happens to MRs, ODP
 * ranges, keys and QPs as it happens. The Rust side calls them through
 * rust/bindings/trace.rs, which tests each event's static key first, so an event
 * nobody enabled costs that test alone. Reading them takes the privileges
 * tracefs and perf ask for: key values appear in the records.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM oxe

#if !defined(OXE_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define OXE_TRACE_H

#include <linux/tracepoint.h>

/* What an MR is: registered from user memory, for fast registration, an indirect key. */
#define OXE_MR_KINDS { 0, "user" }, { 1, "fast" }, { 2, "indirect" }
/* Why a key did not let an access through. */
#define OXE_REFUSALS { 0, "pd" }, { 1, "rights" }, { 2, "bounds" }, { 3, "alignment" }
/* The operation a key was asked for (the core's AccessOp). */
#define OXE_OPS { 0, "local_read" }, { 1, "local_write" }, { 2, "remote_read" }, \
	{ 3, "remote_write" }, { 4, "remote_atomic" }, { 5, "mw_bind" }, { 6, "flush" }

TRACE_EVENT(oxe_mr_reg,
	TP_PROTO(u64 guid, u32 key, u32 kind, u64 iova, u64 length, u64 start,
		 u32 access, bool odp),
	TP_ARGS(guid, key, kind, iova, length, start, access, odp),
	TP_STRUCT__entry(
		__field(u64, guid)
		__field(u32, key)
		__field(u32, kind)
		__field(u64, iova)
		__field(u64, length)
		__field(u64, start)
		__field(u32, access)
		__field(bool, odp)
	),
	TP_fast_assign(
		__entry->guid = guid;
		__entry->key = key;
		__entry->kind = kind;
		__entry->iova = iova;
		__entry->length = length;
		__entry->start = start;
		__entry->access = access;
		__entry->odp = odp;
	),
	TP_printk("guid=%016llx key=0x%08x kind=%s iova=0x%llx length=%llu start=0x%llx access=0x%x odp=%d",
		  __entry->guid, __entry->key, __print_symbolic(__entry->kind, OXE_MR_KINDS),
		  __entry->iova, __entry->length, __entry->start, __entry->access, __entry->odp)
);

TRACE_EVENT(oxe_mr_rereg,
	TP_PROTO(u64 guid, u32 key, u32 flags, u64 old_iova, u64 old_length, u32 old_access,
		 u64 iova, u64 length, u32 access),
	TP_ARGS(guid, key, flags, old_iova, old_length, old_access, iova, length, access),
	TP_STRUCT__entry(
		__field(u64, guid)
		__field(u32, key)
		__field(u32, flags)
		__field(u64, old_iova)
		__field(u64, old_length)
		__field(u32, old_access)
		__field(u64, iova)
		__field(u64, length)
		__field(u32, access)
	),
	TP_fast_assign(
		__entry->guid = guid;
		__entry->key = key;
		__entry->flags = flags;
		__entry->old_iova = old_iova;
		__entry->old_length = old_length;
		__entry->old_access = old_access;
		__entry->iova = iova;
		__entry->length = length;
		__entry->access = access;
	),
	TP_printk("guid=%016llx key=0x%08x flags=0x%x iova=0x%llx->0x%llx length=%llu->%llu access=0x%x->0x%x",
		  __entry->guid, __entry->key, __entry->flags, __entry->old_iova, __entry->iova,
		  __entry->old_length, __entry->length, __entry->old_access, __entry->access)
);

TRACE_EVENT(oxe_mr_dereg,
	TP_PROTO(u64 guid, u32 key),
	TP_ARGS(guid, key),
	TP_STRUCT__entry(
		__field(u64, guid)
		__field(u32, key)
	),
	TP_fast_assign(
		__entry->guid = guid;
		__entry->key = key;
	),
	TP_printk("guid=%016llx key=0x%08x", __entry->guid, __entry->key)
);

DECLARE_EVENT_CLASS(oxe_odp_pages,
	TP_PROTO(u64 start, u64 end, u64 pages),
	TP_ARGS(start, end, pages),
	TP_STRUCT__entry(
		__field(u64, start)
		__field(u64, end)
		__field(u64, pages)
	),
	TP_fast_assign(
		__entry->start = start;
		__entry->end = end;
		__entry->pages = pages;
	),
	TP_printk("start=0x%llx end=0x%llx pages=%llu",
		  __entry->start, __entry->end, __entry->pages)
);

/* A fault mapped [start, end) of a process's memory, bringing in @pages new pages. */
DEFINE_EVENT(oxe_odp_pages, oxe_odp_fault,
	TP_PROTO(u64 start, u64 end, u64 pages),
	TP_ARGS(start, end, pages));

/* The kernel took [start, end) away; @pages of it were mapped. */
DEFINE_EVENT(oxe_odp_pages, oxe_odp_invalidate,
	TP_PROTO(u64 start, u64 end, u64 pages),
	TP_ARGS(start, end, pages));

TRACE_EVENT(oxe_key_refused,
	TP_PROTO(u64 guid, u32 qpn, u32 key, u64 va, u64 length, u32 op, u32 reason),
	TP_ARGS(guid, qpn, key, va, length, op, reason),
	TP_STRUCT__entry(
		__field(u64, guid)
		__field(u32, qpn)
		__field(u32, key)
		__field(u64, va)
		__field(u64, length)
		__field(u32, op)
		__field(u32, reason)
	),
	TP_fast_assign(
		__entry->guid = guid;
		__entry->qpn = qpn;
		__entry->key = key;
		__entry->va = va;
		__entry->length = length;
		__entry->op = op;
		__entry->reason = reason;
	),
	TP_printk("guid=%016llx qpn=%u key=0x%08x va=0x%llx length=%llu op=%s reason=%s",
		  __entry->guid, __entry->qpn, __entry->key, __entry->va, __entry->length,
		  __print_symbolic(__entry->op, OXE_OPS),
		  __print_symbolic(__entry->reason, OXE_REFUSALS))
);

/* The QP states, as ib_qp_state numbers them. */
#define OXE_QP_STATES { 0, "RESET" }, { 1, "INIT" }, { 2, "RTR" }, { 3, "RTS" }, \
	{ 4, "SQD" }, { 5, "SQE" }, { 6, "ERR" }
/* Why a requester goes back and sends again from a PSN. */
#define OXE_GO_BACK { 0, "timeout" }, { 1, "sequence_nak" }, { 2, "rnr_nak" }, { 3, "read_gap" }

TRACE_EVENT(oxe_qp_state,
	TP_PROTO(u64 guid, u32 qpn, u32 old, u32 new),
	TP_ARGS(guid, qpn, old, new),
	TP_STRUCT__entry(
		__field(u64, guid)
		__field(u32, qpn)
		__field(u32, old)
		__field(u32, new)
	),
	TP_fast_assign(
		__entry->guid = guid;
		__entry->qpn = qpn;
		__entry->old = old;
		__entry->new = new;
	),
	TP_printk("guid=%016llx qpn=%u state=%s->%s", __entry->guid, __entry->qpn,
		  __print_symbolic(__entry->old, OXE_QP_STATES),
		  __print_symbolic(__entry->new, OXE_QP_STATES))
);

TRACE_EVENT(oxe_qp_go_back,
	TP_PROTO(u64 guid, u32 qpn, u32 psn, u32 why, u32 retries_left),
	TP_ARGS(guid, qpn, psn, why, retries_left),
	TP_STRUCT__entry(
		__field(u64, guid)
		__field(u32, qpn)
		__field(u32, psn)
		__field(u32, why)
		__field(u32, retries_left)
	),
	TP_fast_assign(
		__entry->guid = guid;
		__entry->qpn = qpn;
		__entry->psn = psn;
		__entry->why = why;
		__entry->retries_left = retries_left;
	),
	TP_printk("guid=%016llx qpn=%u psn=%u why=%s retries_left=%u", __entry->guid,
		  __entry->qpn, __entry->psn, __print_symbolic(__entry->why, OXE_GO_BACK),
		  __entry->retries_left)
);

#endif /* OXE_TRACE_H */

/* Out of the kernel tree: the header is found through -I (Kbuild). */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE oxe_trace
#include <trace/define_trace.h>
