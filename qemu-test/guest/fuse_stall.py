#!/usr/bin/python3
"""A FUSE file system whose one file can be opened and mapped, and whose
reads wait until told to go on.

    fuse_stall.py MOUNTPOINT

Mounts MOUNTPOINT (root only: the mount is made directly, with no fusermount)
with one regular file, `data`, of 16 MiB. Every request the kernel sends is
answered but READ, which is held: a page fault on a mapping of the file (by
its process, or by a kernel thread faulting for a device, as an ODP MR's
does) waits. Prints "ready" once the file system answers and "held" when it
first holds a READ. When stdin closes, every READ held is answered (zeros)
and later ones are answered at once; the process then serves until it is
terminated, after its caller has unmounted MOUNTPOINT.

This is the mapping that does not resolve, of which a hung NFS server or a
daemon that does not answer are the real-world kind. It lets go by
answering, not by aborting the connection: on this kernel a fault that
ib_core's ODP takes on an aborted FUSE mapping retries for good
(hmm_range_fault_unlocked_timeout restarts its budget whenever the fault
dropped the mmap lock, and the aborted read drops it every time).
"""
import ctypes
import os
import signal
import stat
import struct
import sys
import threading

FUSE_LOOKUP, FUSE_FORGET, FUSE_GETATTR = 1, 2, 3
FUSE_OPEN, FUSE_READ, FUSE_RELEASE = 14, 15, 18
FUSE_FLUSH, FUSE_INIT, FUSE_INTERRUPT = 25, 26, 36
FUSE_DESTROY, FUSE_BATCH_FORGET = 38, 42
NO_REPLY = (FUSE_FORGET, FUSE_BATCH_FORGET, FUSE_INTERRUPT)
ROOT, FILE = 1, 2
NAME = b'data'
SIZE = 16 << 20
IN_HEADER = struct.Struct('<IIQQIIIHH')   # len, opcode, unique, nodeid, uid, gid, pid, extlen, pad
OUT_HEADER = struct.Struct('<IiQ')        # len, error, unique
ENOENT, ENOSYS = 2, 38


def attr(node):
    """struct fuse_attr for the root directory or the file."""
    if node == ROOT:
        mode, size, nlink = stat.S_IFDIR | 0o755, 0, 2
    else:
        mode, size, nlink = stat.S_IFREG | 0o666, SIZE, 1
    # ino size blocks atime mtime ctime, their nsecs, mode nlink uid gid
    # rdev blksize flags
    return struct.pack('<QQQQQQIIIIIIIIII', node, size, size // 512, 0, 0, 0,
                       0, 0, 0, mode, nlink, 0, 0, 0, 4096, 0)


class Stall:
    def __init__(self, mountpoint):
        self.mountpoint = mountpoint
        self.fd = os.open('/dev/fuse', os.O_RDWR)
        self.held = []          # READs not answered yet: (unique, size)
        self.answering = False
        self.lock = threading.Lock()
        self.ready = threading.Event()

    def mount(self):
        libc = ctypes.CDLL(None, use_errno=True)
        opts = f'fd={self.fd},rootmode=40000,user_id=0,group_id=0,allow_other'.encode()
        if libc.mount(b'oxe-stall', self.mountpoint.encode(), b'fuse', 0, opts) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f'mount fuse on {self.mountpoint}: {os.strerror(e)}')

    def reply(self, unique, error=0, body=b''):
        os.write(self.fd, OUT_HEADER.pack(OUT_HEADER.size + len(body), -error, unique) + body)

    def serve(self):
        while True:
            try:
                req = os.read(self.fd, 1 << 20 | 4096)
            except OSError:
                return          # unmounted: the connection is gone
            if len(req) < IN_HEADER.size:
                return
            _, op, unique, node, *_ = IN_HEADER.unpack_from(req)
            try:
                self.handle(op, unique, node, req[IN_HEADER.size:])
            except Exception as e:  # keep serving: dying would abort held READs
                print(f'fuse_stall: request {op}: {e}', file=sys.stderr, flush=True)
                try:
                    self.reply(unique, ENOSYS)
                except OSError:
                    pass

    def handle(self, op, unique, node, arg):
        if op in NO_REPLY:
            return
        if op == FUSE_INIT:
            major, minor = struct.unpack_from('<II', arg)
            # major minor max_readahead flags max_background
            # congestion_threshold max_write time_gran max_pages
            # map_alignment flags2 max_stack_depth unused[6]
            body = struct.pack('<IIIIHHIIHHII24x', 7, min(minor, 31), 0, 0, 16, 12,
                               128 << 10, 1, 32, 0, 0, 0)
            self.reply(unique, body=body)
            self.ready.set()
        elif op == FUSE_LOOKUP:
            if node == ROOT and arg.rstrip(b'\0') == NAME:
                # nodeid generation entry_valid attr_valid, their nsecs, attr
                self.reply(unique, body=struct.pack('<QQQQII', FILE, 1, 3600, 3600, 0, 0)
                           + attr(FILE))
            else:
                self.reply(unique, ENOENT)
        elif op == FUSE_GETATTR:
            self.reply(unique, body=struct.pack('<QII', 3600, 0, 0) + attr(node))
        elif op == FUSE_OPEN:
            self.reply(unique, body=struct.pack('<QIi', 1, 0, 0))
        elif op == FUSE_READ:
            # fh offset size read_flags lock_owner flags
            size = struct.unpack_from('<QQI', arg)[2]
            with self.lock:
                if self.answering:
                    self.reply(unique, body=bytes(size))
                    return
                self.held.append((unique, size))
                if len(self.held) == 1:
                    print('held', flush=True)
        elif op in (FUSE_RELEASE, FUSE_FLUSH):
            self.reply(unique)
        elif op == FUSE_DESTROY:
            self.reply(unique)
        else:
            self.reply(unique, ENOSYS)


def main():
    s = Stall(sys.argv[1])
    s.mount()
    t = threading.Thread(target=s.serve, daemon=True)
    t.start()
    # The kernel sends INIT once the mount is made; a request before our
    # answer would wait for it, so "ready" waits too.
    os.stat(os.path.join(s.mountpoint, 'data'))
    print('ready', flush=True)
    sys.stdin.read()
    with s.lock:
        s.answering = True
        for unique, size in s.held:
            s.reply(unique, body=bytes(size))
    print('answered', flush=True)
    signal.pause()


if __name__ == '__main__':
    main()
