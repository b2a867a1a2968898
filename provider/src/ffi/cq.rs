// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Completion queues: the verbs libibverbs calls for them, including the
//! `ibv_cq_ex` polling functions installed in each extended CQ.
//!
//! A CQ is a `Box<OxeCq>` handed to C with `Box::into_raw` once the kernel
//! created it and its ring is mapped, and taken back by `destroy_cq`.
//! The ring's consumer state is behind a [`Locked`]: `poll_cq` takes the
//! lock for one call, an extended poll from `start_poll` to `end_poll`.

use core::ffi::c_int;
use core::mem::{offset_of, size_of, size_of_val};
use core::ptr;

use oxe_core::abi::{
    OxeCqe, OxeCreateCqCmd, OxeCreateCqResp, OxeResizeCqResp, OXE_CREATE_CQ_INLINE_RECV,
};
use oxe_core::Errno;

use super::errno::{cmd_fd, errno_ret, set_errno};
use super::lock::Locked;
use super::queue::MappedQueue;
use crate::completion_queue::{CompletionQueue, ENOENT};
use crate::cqe::{Completion, CqExReaders, InlineRecv};
use crate::sys;
use crate::verbs;

const EINVAL: c_int = Errno::EINVAL.to_i32();

/// The provider's CQ: libibverbs' `verbs_cq` (an `ibv_cq`, or for
/// `ibv_create_cq_ex()` an `ibv_cq_ex`), then the mapped ring.
#[repr(C)]
pub(crate) struct OxeCq {
    /// Must stay first: libibverbs' `ibv_cq`/`ibv_cq_ex` pointers are
    /// pointers to the `OxeCq`.
    vcq: sys::verbs_cq,
    /// Set before the CQ is handed out; `None` only during creation.
    queue: Option<Locked<CompletionQueue<MappedQueue>>>,
}

const _: () = assert!(offset_of!(OxeCq, vcq) == 0);

/// The kernel's reply to `CREATE_CQ`: uverbs' core part, then oxe's.
#[repr(C)]
#[derive(Default)]
struct CreateCqResp {
    core: sys::ib_uverbs_create_cq_resp,
    drv: OxeCreateCqResp,
}

const _: () = assert!(offset_of!(CreateCqResp, drv) == size_of::<sys::ib_uverbs_create_cq_resp>());

/// `CREATE_CQ` with oxe's driver data after uverbs' command.
#[repr(C)]
#[derive(Default)]
struct CreateCqCmd {
    core: sys::ibv_create_cq,
    drv: OxeCreateCqCmd,
}

const _: () = assert!(offset_of!(CreateCqCmd, drv) == size_of::<sys::ibv_create_cq>());
const _: () = assert!(size_of::<sys::oxe_create_cq_cmd>() == size_of::<OxeCreateCqCmd>());

/// The extended `CREATE_CQ` with oxe's driver data.
#[repr(C)]
#[derive(Default)]
struct CreateCqExCmd {
    core: sys::ibv_create_cq_ex,
    drv: OxeCreateCqCmd,
}

const _: () = assert!(offset_of!(CreateCqExCmd, drv) == size_of::<sys::ibv_create_cq_ex>());

/// What a new CQ asks the kernel for: inline-receive slots, unless the
/// process turned inline receive off (`OXE_SCATTER_TO_CQE=0`) or the
/// kernel has none.
///
/// # Safety
/// `context` is a live context of this provider.
unsafe fn cq_cmd(context: *mut sys::ibv_context) -> OxeCreateCqCmd {
    // SAFETY: per the contract.
    let info = unsafe { super::context::context_info(context) };
    OxeCreateCqCmd {
        flags: if info.inline_recv_max > 0 {
            OXE_CREATE_CQ_INLINE_RECV
        } else {
            0
        },
        reserved: 0,
    }
}

/// Copies a message that came with its completion into the receive
/// buffer, before the completion is reported (inline receive). The message
/// is a copy out of the ring, so the destination may be anything the
/// process registered, even the ring.
fn deliver(message: &InlineRecv) {
    for (va, bytes) in message.pieces() {
        // SAFETY: the kernel resolved each piece through the lkey of an MR
        // this process registered with local write access, checked it
        // inside that MR as it checks a buffer it writes itself, and gave
        // its address only for pages pinned writable from this process's
        // address space: the application's own receive buffer, handed to
        // the receive it posted and not yet completed. `bytes` is the
        // provider's copy, which no other reference can alias.
        unsafe { ptr::copy(bytes.as_ptr(), va as usize as *mut u8, bytes.len()) };
    }
}

/// The kernel's reply to the extended `CREATE_CQ`.
#[repr(C)]
#[derive(Default)]
struct CreateCqExResp {
    core: sys::ib_uverbs_ex_create_cq_resp,
    drv: OxeCreateCqResp,
}

const _: () =
    assert!(offset_of!(CreateCqExResp, drv) == size_of::<sys::ib_uverbs_ex_create_cq_resp>());

/// A zeroed CQ for the `ibv_cmd_*` helper to fill in.
fn new_cq() -> *mut OxeCq {
    Box::into_raw(Box::new(OxeCq {
        vcq: sys::verbs_cq::default(),
        queue: None,
    }))
}

/// Maps the ring the kernel created for `cq`.
///
/// # Safety
/// `context` is the CQ's live context and `cq` a CQ from [`new_cq`] not
/// yet handed out.
unsafe fn attach_queue(
    context: *mut sys::ibv_context,
    cq: *mut OxeCq,
    drv: &OxeCreateCqResp,
) -> Result<(), c_int> {
    // SAFETY: a live context, per the contract.
    let cmd_fd = unsafe { cmd_fd(context) };
    let mem = MappedQueue::map(cmd_fd, &drv.cq, OxeCqe::SIZE)?;
    // SAFETY: `cq` is ours alone until it is returned.
    unsafe { (*cq).queue = Some(Locked::new(CompletionQueue::new(mem))) };
    Ok(())
}

/// Undoes a creation that failed after the kernel said yes.
///
/// # Safety
/// `cq` is from [`new_cq`], created in the kernel, and not handed out.
unsafe fn abandon(cq: *mut OxeCq) {
    // SAFETY: the kernel object exists and `cq` is its `ibv_cq` (offset 0).
    // If the kernel refuses, there is nothing better to do than to let it
    // reclaim the CQ with the context.
    unsafe { sys::ibv_cmd_destroy_cq(cq.cast::<sys::ibv_cq>()) };
    // SAFETY: from `Box::into_raw` in `new_cq`, never handed out.
    drop(unsafe { Box::from_raw(cq) });
}

/// The ring state of a CQ.
///
/// # Safety
/// `cq` must be a live CQ of this provider.
unsafe fn queue_of<'a>(cq: *mut sys::ibv_cq) -> Option<&'a Locked<CompletionQueue<MappedQueue>>> {
    // SAFETY: a live `OxeCq` (the `ibv_cq` is at offset 0); `queue` is
    // only written before the CQ is handed out, so sharing it is sound.
    unsafe { (*cq.cast::<OxeCq>()).queue.as_ref() }
}

/// Drops the unread completions of QP `qp_num` from `cq`, after the QP was
/// reset (see [`CompletionQueue::purge_qp`]).
///
/// # Safety
/// `cq` must be a live CQ of this provider.
pub(crate) unsafe fn purge_qp(cq: *mut sys::ibv_cq, qp_num: u32) {
    // SAFETY: a live CQ, per the contract.
    if let Some(queue) = unsafe { queue_of(cq) } {
        // A broken producer index leaves the CQ as it is: the next poll
        // reports it.
        let _ = queue.lock().purge_qp(qp_num);
    }
}

/// `create_cq` (`ibv_create_cq()`).
///
/// # Safety
/// libibverbs' arguments: a live context, and a completion channel that is
/// NULL or live.
pub(crate) unsafe extern "C" fn create_cq(
    context: *mut sys::ibv_context,
    cqe: c_int,
    channel: *mut sys::ibv_comp_channel,
    comp_vector: c_int,
) -> *mut sys::ibv_cq {
    let cq = new_cq();
    let mut cmd = CreateCqCmd {
        // SAFETY: libibverbs passes a live context.
        drv: unsafe { cq_cmd(context) },
        ..Default::default()
    };
    let mut resp = CreateCqResp::default();
    // SAFETY: `cq` is a fresh allocation starting with its `ibv_cq`, which
    // the helper fills in (its address is the kernel's user handle, so it
    // must not move: it is boxed). The command pointer and size cover all of
    // `cmd`, uverbs' part then oxe's driver data; the response pointer is
    // derived from all of `resp` so the driver part may be written.
    let ret = unsafe {
        sys::ibv_cmd_create_cq(
            context,
            cqe,
            channel,
            comp_vector,
            cq.cast::<sys::ibv_cq>(),
            (&raw mut cmd).cast::<sys::ibv_create_cq>(),
            size_of_val(&cmd),
            (&raw mut resp).cast::<sys::ib_uverbs_create_cq_resp>(),
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        // SAFETY: from `Box::into_raw` above, not handed out.
        drop(unsafe { Box::from_raw(cq) });
        set_errno(ret);
        return ptr::null_mut();
    }
    // SAFETY: `context` is live and `cq` not handed out.
    if let Err(err) = unsafe { attach_queue(context, cq, &resp.drv) } {
        // SAFETY: created in the kernel above, not handed out.
        unsafe { abandon(cq) };
        set_errno(err);
        return ptr::null_mut();
    }
    cq.cast::<sys::ibv_cq>()
}

/// `create_cq_ex` (`ibv_create_cq_ex()`).
///
/// # Safety
/// libibverbs' arguments: a live context and the caller's attributes.
pub(crate) unsafe extern "C" fn create_cq_ex(
    context: *mut sys::ibv_context,
    attr: *mut sys::ibv_cq_init_attr_ex,
) -> *mut sys::ibv_cq_ex {
    // SAFETY: libibverbs passes the application's attributes, valid for
    // the call; the reference ends before `attr` is passed on.
    let a = unsafe { &*attr };
    let readers = match verbs::check_cq_init_attr(a.comp_mask, a.flags, a.wc_flags) {
        Ok(readers) => readers,
        Err(err) => {
            set_errno(err);
            return ptr::null_mut();
        }
    };
    let cq = new_cq();
    let mut cmd = CreateCqExCmd {
        // SAFETY: libibverbs passes a live context.
        drv: unsafe { cq_cmd(context) },
        ..Default::default()
    };
    let mut resp = CreateCqExResp::default();
    // SAFETY: as in `create_cq` (the command with its driver data); `cq` is
    // a `verbs_cq` at offset 0, there are no provider attributes (NULL) and
    // no command flags.
    let ret = unsafe {
        sys::ibv_cmd_create_cq_ex(
            context,
            attr,
            ptr::null_mut(),
            cq.cast::<sys::verbs_cq>(),
            (&raw mut cmd).cast::<sys::ibv_create_cq_ex>(),
            size_of_val(&cmd),
            (&raw mut resp).cast::<sys::ib_uverbs_ex_create_cq_resp>(),
            size_of_val(&resp),
            0,
        )
    };
    if ret != 0 {
        // SAFETY: from `Box::into_raw` above, not handed out.
        drop(unsafe { Box::from_raw(cq) });
        set_errno(ret);
        return ptr::null_mut();
    }
    // SAFETY: `context` is live and `cq` not handed out.
    if let Err(err) = unsafe { attach_queue(context, cq, &resp.drv) } {
        // SAFETY: created in the kernel above, not handed out.
        unsafe { abandon(cq) };
        set_errno(err);
        return ptr::null_mut();
    }
    let ex = cq.cast::<sys::ibv_cq_ex>();
    // SAFETY: the `ibv_cq_ex` view of the `verbs_cq` at offset 0 of the
    // `OxeCq`, ours alone until returned.
    install_readers(unsafe { &mut *ex }, readers);
    ex
}

/// Fills in an extended CQ's polling functions: the mandatory ones, and
/// the readers for the fields the application asked for. Readers for
/// fields it did not ask for stay NULL, as libibverbs' contract allows.
fn install_readers(ex: &mut sys::ibv_cq_ex, readers: CqExReaders) {
    ex.start_poll = Some(start_poll);
    ex.next_poll = Some(next_poll);
    ex.end_poll = Some(end_poll);
    ex.read_opcode = Some(read_opcode);
    ex.read_vendor_err = Some(read_vendor_err);
    ex.read_wc_flags = Some(read_wc_flags);
    ex.read_byte_len = readers.byte_len.then_some(read_byte_len as _);
    ex.read_imm_data = readers.imm_data.then_some(read_imm_data as _);
    ex.read_qp_num = readers.qp_num.then_some(read_qp_num as _);
    ex.read_src_qp = readers.src_qp.then_some(read_src_qp as _);
    ex.read_slid = readers.slid.then_some(read_slid as _);
    ex.read_sl = readers.sl.then_some(read_sl as _);
    ex.read_dlid_path_bits = readers.dlid_path_bits.then_some(read_dlid_path_bits as _);
}

/// `destroy_cq` (`ibv_destroy_cq()`).
///
/// # Safety
/// `cq` must come from this provider; on success it must not be used again.
pub(crate) unsafe extern "C" fn destroy_cq(cq: *mut sys::ibv_cq) -> c_int {
    // SAFETY: a live CQ of this provider.
    let ret = unsafe { sys::ibv_cmd_destroy_cq(cq) };
    if ret != 0 {
        return errno_ret(ret);
    }
    // SAFETY: the kernel object is gone and `cq` is the `OxeCq` Box the
    // create verb leaked; dropping it unmaps the ring.
    drop(unsafe { Box::from_raw(cq.cast::<OxeCq>()) });
    0
}

/// The kernel's reply to `RESIZE_CQ`: uverbs' core part, then oxe's.
#[repr(C)]
#[derive(Default)]
struct ResizeCqResp {
    core: sys::ib_uverbs_resize_cq_resp,
    drv: OxeResizeCqResp,
}

const _: () = assert!(offset_of!(ResizeCqResp, drv) == size_of::<sys::ib_uverbs_resize_cq_resp>());
const _: () = assert!(size_of::<sys::oxe_resize_cq_resp>() == size_of::<OxeResizeCqResp>());

/// `resize_cq` (`ibv_resize_cq()`): the kernel moves the completions not
/// yet polled to a new ring, which is mapped in place of the old one.
///
/// The CQ stays locked from before the system call until the new ring is
/// in place, so no poll runs against a ring the kernel has left. Should
/// the new ring fail to map (the kernel has moved to it by then), the
/// error is returned and the CQ keeps the old ring, which gets no more
/// completions, as with rxe.
///
/// # Safety
/// `cq` must be a live CQ of this provider.
pub(crate) unsafe extern "C" fn resize_cq(cq: *mut sys::ibv_cq, cqe: c_int) -> c_int {
    // SAFETY: a live CQ, per the contract.
    let Some(queue) = (unsafe { queue_of(cq) }) else {
        return errno_ret(EINVAL);
    };
    let mut queue = queue.lock();
    // The kernel moves the completions from the released index on.
    queue.release();
    let mut cmd = sys::ibv_resize_cq::default();
    let mut resp = ResizeCqResp::default();
    // SAFETY: a live CQ; `cmd` carries no driver data (its exact size); the
    // response pointer is derived from all of `resp` so the driver part may
    // be written. On success the helper sets `cq->cqe` from the reply.
    let ret = unsafe {
        sys::ibv_cmd_resize_cq(
            cq,
            cqe,
            &mut cmd,
            size_of_val(&cmd),
            (&raw mut resp).cast::<sys::ib_uverbs_resize_cq_resp>(),
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        return errno_ret(ret);
    }
    // SAFETY: a live CQ.
    let context = unsafe { (*cq).context };
    // SAFETY: a live CQ's context is live.
    let cmd_fd = unsafe { cmd_fd(context) };
    match MappedQueue::map(cmd_fd, &resp.drv.cq, OxeCqe::SIZE) {
        Ok(mem) => {
            // The old mapping goes here, unmapped on drop.
            drop(queue.replace_mem(mem));
            0
        }
        Err(err) => errno_ret(err),
    }
}

/// `poll_cq` (`ibv_poll_cq()`): up to `num_entries` completions into `wc`.
/// Returns how many, or a negative errno for a ring the kernel broke.
///
/// # Safety
/// `cq` must be a live CQ of this provider and `wc` room for `num_entries`
/// work completions.
pub(crate) unsafe extern "C" fn poll_cq(
    cq: *mut sys::ibv_cq,
    num_entries: c_int,
    wc: *mut sys::ibv_wc,
) -> c_int {
    // SAFETY: a live CQ, per the contract.
    let Some(queue) = (unsafe { queue_of(cq) }) else {
        return 0;
    };
    let mut queue = queue.lock();
    let mut polled: c_int = 0;
    while polled < num_entries {
        match queue.poll_one(deliver) {
            Ok(Some(completion)) => {
                let entry = wc.wrapping_add(polled as usize);
                // SAFETY: `polled` < `num_entries`, so the entry is inside
                // the caller's array; `write` does not read the
                // (uninitialised) old contents.
                unsafe { entry.write(completion.to_ibv_wc()) };
                polled += 1;
            }
            Ok(None) => break,
            Err(err) => {
                if polled == 0 {
                    set_errno(err);
                    return -err;
                }
                break;
            }
        }
    }
    queue.release();
    polled
}

/// The completion an extended poll is on.
///
/// # Safety
/// The calling thread must be inside `start_poll` .. `end_poll` on `cq`.
unsafe fn current(cq: *mut sys::ibv_cq_ex) -> Completion {
    // SAFETY: a live CQ (the application polls it).
    match unsafe { queue_of(cq.cast::<sys::ibv_cq>()) } {
        // SAFETY: per the contract this thread holds the CQ's lock.
        Some(queue) => *unsafe { queue.held() }.current(),
        None => Completion::default(),
    }
}

/// Publishes the step's completion in the `ibv_cq_ex` fields libibverbs'
/// inline helpers read directly.
///
/// # Safety
/// `cq` is a live extended CQ whose lock this thread holds.
unsafe fn expose(cq: *mut sys::ibv_cq_ex, completion: &Completion) {
    // SAFETY: the CQ is live; the lock holder is the only writer.
    unsafe { (*cq).status = completion.status };
    // SAFETY: as above.
    unsafe { (*cq).wr_id = completion.wr_id };
}

/// `ibv_cq_ex::start_poll`: locks the CQ and moves to its first
/// completion; `ENOENT` (and unlocked) if there is none.
unsafe extern "C" fn start_poll(
    cq: *mut sys::ibv_cq_ex,
    attr: *mut sys::ibv_poll_cq_attr,
) -> c_int {
    // SAFETY: NULL or the application's attributes, valid for the call.
    if !attr.is_null() && unsafe { (*attr).comp_mask } != 0 {
        return errno_ret(EINVAL);
    }
    // SAFETY: a live extended CQ of this provider.
    let Some(queue) = (unsafe { queue_of(cq.cast::<sys::ibv_cq>()) }) else {
        return errno_ret(EINVAL);
    };
    queue.enter();
    // SAFETY: entered just above, on this thread.
    let result = unsafe { queue.held() }.step(deliver).copied();
    match result {
        Ok(completion) => {
            // SAFETY: live, and this thread holds the lock.
            unsafe { expose(cq, &completion) };
            0
        }
        Err(err) => {
            // SAFETY: entered above; no reference from `held` is left. The
            // application calls no `end_poll` after a failed `start_poll`.
            unsafe { queue.leave() };
            if err == ENOENT {
                err
            } else {
                errno_ret(err)
            }
        }
    }
}

/// `ibv_cq_ex::next_poll`: moves to the next completion, `ENOENT` if none
/// (the CQ stays locked until `end_poll`).
unsafe extern "C" fn next_poll(cq: *mut sys::ibv_cq_ex) -> c_int {
    // SAFETY: a live extended CQ, polled by this thread since `start_poll`.
    let Some(queue) = (unsafe { queue_of(cq.cast::<sys::ibv_cq>()) }) else {
        return errno_ret(EINVAL);
    };
    // SAFETY: this thread holds the lock since `start_poll`.
    let result = unsafe { queue.held() }.step(deliver).copied();
    match result {
        Ok(completion) => {
            // SAFETY: live, and this thread holds the lock.
            unsafe { expose(cq, &completion) };
            0
        }
        Err(err) if err == ENOENT => err,
        Err(err) => errno_ret(err),
    }
}

/// `ibv_cq_ex::end_poll`: gives the polled slots back and unlocks.
unsafe extern "C" fn end_poll(cq: *mut sys::ibv_cq_ex) {
    // SAFETY: a live extended CQ, polled by this thread since `start_poll`.
    if let Some(queue) = unsafe { queue_of(cq.cast::<sys::ibv_cq>()) } {
        // SAFETY: this thread holds the lock since `start_poll`.
        unsafe { queue.held() }.release();
        // SAFETY: the reference from `held` is gone.
        unsafe { queue.leave() };
    }
}

/// `ibv_cq_ex::read_opcode`.
unsafe extern "C" fn read_opcode(cq: *mut sys::ibv_cq_ex) -> sys::ibv_wc_opcode {
    // SAFETY: readers are called between `start_poll` and `end_poll`.
    unsafe { current(cq) }.opcode
}

/// `ibv_cq_ex::read_vendor_err`.
unsafe extern "C" fn read_vendor_err(cq: *mut sys::ibv_cq_ex) -> u32 {
    // SAFETY: readers are called between `start_poll` and `end_poll`.
    unsafe { current(cq) }.vendor_err
}

/// `ibv_cq_ex::read_byte_len`.
unsafe extern "C" fn read_byte_len(cq: *mut sys::ibv_cq_ex) -> u32 {
    // SAFETY: readers are called between `start_poll` and `end_poll`.
    unsafe { current(cq) }.byte_len
}

/// `ibv_cq_ex::read_imm_data`, which `ibv_wc_read_invalidated_rkey()`
/// also calls: the one field holds either, as in `ibv_wc`.
unsafe extern "C" fn read_imm_data(cq: *mut sys::ibv_cq_ex) -> sys::__be32 {
    // SAFETY: readers are called between `start_poll` and `end_poll`.
    unsafe { current(cq) }.imm_or_inv
}

/// `ibv_cq_ex::read_qp_num`.
unsafe extern "C" fn read_qp_num(cq: *mut sys::ibv_cq_ex) -> u32 {
    // SAFETY: readers are called between `start_poll` and `end_poll`.
    unsafe { current(cq) }.qp_num
}

/// `ibv_cq_ex::read_src_qp`.
unsafe extern "C" fn read_src_qp(cq: *mut sys::ibv_cq_ex) -> u32 {
    // SAFETY: readers are called between `start_poll` and `end_poll`.
    unsafe { current(cq) }.src_qp
}

/// `ibv_cq_ex::read_wc_flags`.
unsafe extern "C" fn read_wc_flags(cq: *mut sys::ibv_cq_ex) -> core::ffi::c_uint {
    // SAFETY: readers are called between `start_poll` and `end_poll`.
    unsafe { current(cq) }.wc_flags
}

/// `ibv_cq_ex::read_slid`: RoCE has no LIDs.
unsafe extern "C" fn read_slid(_cq: *mut sys::ibv_cq_ex) -> u32 {
    0
}

/// `ibv_cq_ex::read_sl`: RoCE has no service levels in completions.
unsafe extern "C" fn read_sl(_cq: *mut sys::ibv_cq_ex) -> u8 {
    0
}

/// `ibv_cq_ex::read_dlid_path_bits`: RoCE has no LIDs.
unsafe extern "C" fn read_dlid_path_bits(_cq: *mut sys::ibv_cq_ex) -> u8 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_follow_the_requested_fields() {
        let mut ex = sys::ibv_cq_ex::default();
        install_readers(
            &mut ex,
            CqExReaders {
                byte_len: true,
                src_qp: true,
                ..Default::default()
            },
        );
        assert!(ex.start_poll.is_some() && ex.next_poll.is_some() && ex.end_poll.is_some());
        assert!(ex.read_opcode.is_some() && ex.read_vendor_err.is_some());
        assert!(ex.read_wc_flags.is_some());
        assert!(ex.read_byte_len.is_some() && ex.read_src_qp.is_some());
        assert!(ex.read_imm_data.is_none() && ex.read_qp_num.is_none());
        assert!(ex.read_slid.is_none() && ex.read_sl.is_none());
        assert!(ex.read_dlid_path_bits.is_none());
        assert!(ex.read_completion_ts.is_none() && ex.read_cvlan.is_none());
    }
}
