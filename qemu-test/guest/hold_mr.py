#!/usr/bin/python3
"""Holds a user context, a PD and a registered MR on DEV until stdin closes.

Used by the lifecycle suite to remove the device (link delete, rmmod) while
userspace still has live objects: prints "ready LKEY RKEY" once registered.
"""
import sys

from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.libibverbs_enums import ibv_access_flags as acc

dev = sys.argv[1]
ctx = Context(name=dev)
pd = PD(ctx)
mr = MR(pd, 1 << 20, acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_WRITE)
print(f"ready {mr.lkey:#x} {mr.rkey:#x}", flush=True)
sys.stdin.read()
