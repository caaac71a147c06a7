#!/usr/bin/env python3
# Writes the seed corpus of fuzz_socket (tests/fuzz/corpus/socket/). Layout
# of an input: tests/fuzz/fuzz_socket.c. Run from the repository root.
import os
import struct

out = "tests/fuzz/corpus/socket"
CONNECT, SEND, SEND_FD, SHUT_WR, CLOSE, DOORBELL, MAILBOX, TICK = range(8)
NOP, LEASE, RELEASE, RESET_QUEUE, INJECT_FAULT, SET_LABEL = range(6)


def step(kind, client, payload=b""):
    return bytes([kind, client]) + payload


def send(client, data, fd=False):
    return step(SEND_FD if fd else SEND, client, bytes([len(data)]) + data)


def doorbell(client, vector, value=1):
    return step(DOORBELL, client, bytes([vector]) + struct.pack("<Q", value))


def mailbox(client, cmd, args=(0, 0, 0, 0), label=b"", opts=0, pick=0):
    a = list(args) + [0] * (4 - len(args))
    return step(MAILBOX, client, bytes([cmd, opts, pick, 0]) + struct.pack("<4Q", *a) +
                label[:16].ljust(16, b"\0"))


seeds = {
    "one_peer": step(CONNECT, 0) + send(0, b"hello") + step(CLOSE, 0),
    "three_peers": b"".join(step(CONNECT, i) for i in range(3)) + step(CLOSE, 1) +
    step(CONNECT, 1) + step(SHUT_WR, 2) + step(TICK, 0),
    "refused": b"".join(step(CONNECT, i) for i in range(9)) + step(CLOSE, 3) + step(CONNECT, 9) +
    step(CLOSE, 0),
    "fd_passing": step(CONNECT, 0) + step(CONNECT, 1) + send(0, b"\x01" * 8, fd=True) +
    send(1, struct.pack("<q", -1), fd=True) + step(SHUT_WR, 0),
    "doorbells": step(CONNECT, 0) + b"".join(doorbell(0, v, v + 1) for v in range(4)) +
    doorbell(0, 1, 0xFFFFFFFFFFFFFFFE) + step(TICK, 0),
    "mailbox_lease": step(CONNECT, 0) + step(CONNECT, 1) +
    mailbox(0, LEASE, (65536, 0), b"weights") + mailbox(1, LEASE, (4096, 65536), b"kv\x01\x7f") +
    mailbox(0, SET_LABEL, (0,), b"renamed", opts=2, pick=0) +
    mailbox(1, RELEASE, (0,), opts=2, pick=0) + mailbox(0, RELEASE, (0,), opts=2, pick=1) +
    step(CLOSE, 1),
    "mailbox_faults": step(CONNECT, 2) + mailbox(2, INJECT_FAULT, (9,)) +
    mailbox(2, LEASE, (8192,), b"bad") + mailbox(2, RESET_QUEUE) + mailbox(2, INJECT_FAULT, (3,)) +
    mailbox(2, INJECT_FAULT, (42,)) + mailbox(2, 7) + mailbox(2, LEASE, (1 << 40,)) +
    mailbox(2, NOP),
    "leave_with_leases": step(CONNECT, 0) + step(CONNECT, 1) +
    mailbox(0, LEASE, (1 << 20,), b"a") + mailbox(0, LEASE, (12345,), b"b") + step(CLOSE, 0) +
    mailbox(1, LEASE, (1 << 20,), b"c"),
}
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
